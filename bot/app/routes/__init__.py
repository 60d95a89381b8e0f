"""The app's routes, one ``APIRouter`` per concern, each built from the shared ``AppContext``.

Public listener: ``twilio_voice`` (the call webhook), ``media`` (the media stream and its call),
``transfer`` (warm transfer), ``callbacks`` (placed callbacks), ``health`` (``public_router``),
``records`` (turn records). Operations listener: ``health`` (``admin_router``), ``metrics``.
"""
