"""The phone line around the calls: who may start one (slots, limits, tokens, webhook abuse),
what several workers share through the records database, and how the server drains and stops."""
