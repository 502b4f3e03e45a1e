# Sourced by the repo's installers before they call apt: one installer at a time on a machine
# (parallel test workers may start two at once, and apt refuses a second while one runs).
# The lock is released when the sourcing script exits.
exec 9>"${TMPDIR:-/tmp}/stalwart-apt.lock"
flock 9
