"""The web door (SPEC §1, §11): the pages people read and the texts agents read. Views call the
selectors and render templates; they decide no rule."""
