# Runs inside a sandbox's pid namespace (sh -c, not sourced) when a command overruns its timeout or
# floods its output: SIGKILLs every process that started in the last $2 centiseconds except the pids
# listed in $1 (comma-separated: the init and the shell). Matching by start time, not by parent or
# process group, also catches orphans and daemons (a fork bomb re-parents to init within microseconds).
since=$2
shell=$1
mode=$3
protect=","
p=$shell
while [ "${p:-0}" -gt 0 ] 2>/dev/null && [ -r "/proc/$p/stat" ]; do
  protect="$protect$p,"
  { read -r stat < "/proc/$p/stat"; } 2>/dev/null || break
  set -- ${stat##*) }
  p=$2  # field 4: the parent
done
if [ "$mode" = kill-shell ]; then
  protect=$(echo "$protect" | sed "s/,$shell,/,/")
  # Hold the supervisor still, or it would start a new shell while we sweep (and we would kill that).
  supervisor=$(set -- $(cat "/proc/$shell/stat" 2>/dev/null | sed 's/.*) //'); echo "${2:-0}")
  [ "$supervisor" -gt 1 ] 2>/dev/null && kill -STOP "$supervisor"
fi
# The shell's SIGUSR1 trap makes it abandon the rest of the command line once the current process dies.
[ "$mode" = kill-shell ] || kill -USR1 "$shell" 2>/dev/null
self=$$
# Stop before killing: a stopped process cannot fork, so each sweep finds fewer running ones, and a sweep that
# finds none running has them all; then SIGKILL, which a stopped process takes. (Killing sweep by sweep loses
# to a fork bomb.) The host's cgroup freezer (reaper.py) does this without racing; this is its fallback.
victims() {
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$self" ] && continue
    case $protect in *",$p,"*) continue ;; esac
    { read -r stat < "$d/stat"; } 2>/dev/null || continue
    # Fields after "pid (comm) ": $1 is field 3 (state), so field 22 (starttime) is ${20}.
    set -- ${stat##*) }
    [ "$1" = Z ] && continue
    [ "${20:-0}" -ge "$since" ] 2>/dev/null || continue
    [ "$1" = T ] && [ "$want" = running ] && continue
    kill "-$sig" "$p" 2>/dev/null && found=1
  done
}
round=0
while [ $round -lt 500 ]; do
  found=; want=running; sig=STOP; victims
  [ -z "$found" ] && break
  round=$((round + 1))
done
round=0
while [ $round -lt 50 ]; do
  found=; want=all; sig=KILL; victims
  [ -z "$found" ] && break
  round=$((round + 1))
done
[ -n "${supervisor:-}" ] && kill -CONT "$supervisor" 2>/dev/null
exit 0
