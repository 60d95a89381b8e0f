"""The staff desk: a web console under /desk for the city's staff (docs/desk.md).

    auth.py         passwords (argon2id), session cookies, CSRF tokens, API tokens, login limits
    departments.py  which department resolves each category's tickets (departments.toml)
    queries.py      what the pages read from the records database
    routes.py       the pages and the JSON API (Jinja2 templates in templates/)
    context.py      what the routes share (store, routing, signer, limiter, templates)
    app.py          where it is served (``mount_desk`` on the bot's app, ``desk_app`` alone)
"""
