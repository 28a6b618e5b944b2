from django.core.wsgi import get_wsgi_application

from cairn.startup import load_settings

load_settings()

application = get_wsgi_application()
