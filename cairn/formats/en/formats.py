"""Dates and times as the public pages write them: ISO order, 24-hour clock, and the zone (UTC),
so the keeper never wonders which zone a time is in."""

DATETIME_FORMAT = "Y-m-d H:i T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i T"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
