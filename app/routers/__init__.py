"""One router per resource; the app factory includes those listed in ``app.factory.ROUTER_MODULES``."""
