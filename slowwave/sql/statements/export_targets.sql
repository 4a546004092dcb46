-- Every export target a forget must reach, and the kinds each holds.
SELECT target, what FROM export_targets ORDER BY target
