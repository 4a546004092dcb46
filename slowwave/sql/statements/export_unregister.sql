-- An export target a forget should no longer reach (`slowwave export --drop`).
DELETE FROM export_targets WHERE target = %(target)s RETURNING target
