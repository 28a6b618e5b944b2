"""The keeper's door, Django's admin (SPEC §13): the branded site and what the change lists share.

The ModelAdmins stay in each app's admin.py, where Django's autodiscovery looks for them; they are
this door's modules all the same, and like every door they import the core and the domain apps,
never another door."""
