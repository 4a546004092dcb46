-- ui: sign out
DELETE FROM ui_sessions WHERE token_sha256 = %(digest)s
