"""The keeper's door, Django's admin (SPEC §13): the branded site and what the change lists share.
The ModelAdmins stay in each app's admin.py, where Django's autodiscovery looks for them."""
