"""The web app: :func:`papertrail.web.app.build_app`, its routes by family, and its static files."""
