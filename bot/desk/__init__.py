"""The staff desk: a web console under /desk for the city's staff (docs/desk.md).

    auth.py         passwords (argon2id), session cookies, CSRF tokens, API tokens, login limits
    departments.py  which department resolves each category's tickets (departments.toml)
    queries.py      what the pages read from the records database
    routes.py       every route under /desk: the screens' routers (Jinja2 templates in templates/):
                    login.py, tickets.py (and the JSON API), calls.py, recordings.py, audit.py, staff.py, service.py
    guard.py        who is asking (a session or a bearer token), the CSRF check, the desk's refusals
    context.py      what the routes share (store, routing, signer, limiter, templates)
    app.py          where it is served (``mount_desk`` on the bot's app, ``desk_app`` alone)
"""
