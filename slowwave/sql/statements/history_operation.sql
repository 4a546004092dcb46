-- An operator's operation on history (revert, forget): kind, target, who, why, rows touched.
INSERT INTO history_operations (kind, target, done_by, reason, rows)
VALUES (%(kind)s, %(target)s, %(by)s, %(reason)s, %(rows)s)
RETURNING id
