package steps

// The bash text of exported scripts. It uses bash, coreutils (stat, date,
// mktemp, cp, mv, chmod, chown, cat, id, sleep), grep, find and awk (for
// fstab only), and perl for the kernel lease that alone proves a
// segment unused (without perl the cleanup keeps every file, as ncclwiz
// fix does where no lease can be taken); nothing else.

// scriptPrelude parses the arguments and defines the output helpers.
const scriptPrelude = `
APPLY=0
case "${1:-}" in
  --apply) APPLY=1 ;;
  ''|--dry-run) ;;
  -h|--help) grep '^#' "$0" | head -n 12; exit 0 ;;
  *) printf 'usage: %s [--dry-run|--apply]\n' "$0" >&2; exit 2 ;;
esac
CHANGED=0 FAILED=0 SKIPPED=0

say() { printf '%s\n' "$*"; }
section() { printf '\n== %s\n' "$1"; }
step() { printf '\n[%s] %s\n' "$1" "$2"; }
is_root() { [ "$(id -u)" = 0 ]; }

# show ARGS: the command line, quoted so that it could be pasted.
show() {
  local a out=
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then out+=" $a"; else out+=" '${a//\'/\'\\\'\'}'"; fi
  done
  printf '%s\n' "${out# }"
}

# act CMD ARGS: run the command with --apply, only show it otherwise.
# A practice script never runs one (see the guard below the arguments).
act() {
  if [ -n "$NCCLWIZ_PRACTICE" ]; then
    say "ncclwiz: refused, a practice script never acts: $(show "$@")" >&2
    exit 3
  fi
  if [ "$APPLY" = 1 ]; then
    say "  + $(show "$@")"
    if "$@"; then
      CHANGED=$((CHANGED + 1))
    else
      say "  failed (exit $?): $(show "$@")"
      FAILED=$((FAILED + 1))
    fi
  else
    say "  would run: $(show "$@")"
  fi
}
`

// practiceGuard stops a script exported from a practice scenario before
// any step: its steps describe the simulation, so even a dry run would
// compare them with this machine and mislead. It is the guarantee; act's
// own refusal is only a second line (helpers also write temporary files
// and move segments aside before their first act).
const practiceGuard = `
if [ -n "$NCCLWIZ_PRACTICE" ]; then
  if [ "$APPLY" = 1 ]; then
    printf '%s\n' "ncclwiz: refusing --apply: this is a practice script from the simulated scenario '$NCCLWIZ_PRACTICE'." \
      "Its steps are the simulation's, not this machine's; nothing was changed." \
      "For this machine: ncclwiz fix --export fix.sh (without --scenario)." >&2
    exit 3
  fi
  say "PRACTICE SCRIPT from the simulated scenario '$NCCLWIZ_PRACTICE': read it to see what the fixes would do there."
  say "It runs none of its steps here, not even as a dry run; nothing was changed."
  say "For this machine: ncclwiz fix --export fix.sh (without --scenario)."
  exit 0
fi
`

// scriptFooter reports and sets the exit status; RECHECK is the command
// that re-checks the same place (ExportOptions.Context), a quoted word.
const scriptFooter = `
echo
if [ "$APPLY" = 1 ]; then
  say "done: $CHANGED change(s), $FAILED failure(s), $SKIPPED step(s) skipped."
  say RECHECK
else
  say "dry run: nothing was changed. Run with --apply to act."
fi
[ "$FAILED" = 0 ]
`

// helperOrder is the order helpers appear in a script.
var helperOrder = []string{"shm_file", "shm_holder", "lease_rm", "remove_unused", "same_proc", "stop_rank", "remount_shm", "fstab_set", "put_file"}

var helperDeps = map[string][]string{
	"remove_unused": {"shm_file", "shm_holder", "lease_rm"},
	"stop_rank":     {"same_proc"},
}

var helperText = map[string]string{
	"shm_file": `# shm_file PATH INODE: succeeds only if PATH is still the regular,
# single-link file with that inode, unmodified for two minutes (SHM_DEV is
# then its device); WHY says why not.
shm_file() {
  local p=$1 want=$2 ino dev nlink mtime now st
  WHY=
  if [ -L "$p" ] || [ ! -f "$p" ]; then WHY="not a regular file (any more)"; return 1; fi
  # Not < <(…): process substitution needs /dev/fd, which needs /proc.
  st=$(stat -c '%i %d %h %Y' -- "$p") || { WHY="cannot stat it"; return 1; }
  read -r ino dev nlink mtime <<<"$st"
  if [ "$ino" != "$want" ]; then WHY="a different file now (inode $ino, planned $want)"; return 1; fi
  if [ "$nlink" != 1 ]; then WHY="it has $nlink hard links"; return 1; fi
  now=$(date +%s)
  if [ $((now - mtime)) -lt 120 ]; then WHY="modified $((now - mtime)) s ago; a job may be starting"; return 1; fi
  SHM_DEV=$dev
}
`,
	"shm_holder": `# shm_holder PATH: succeeds (WHY names it) if a process this shell can
# inspect has PATH open — an O_PATH descriptor included, which the kernel
# lease does not see — or mapped (/proc/*/fd, the threads' own file tables,
# /proc/*/maps), matched by device and inode. Seeing none is no proof of
# anything: only the kernel lease (lease_rm) proves a file unused.
shm_holder() {
  local p=$1 ino dev fd m majmin st
  st=$(stat -c '%i %d' -- "$p") || return 1
  read -r ino dev <<<"$st"
  fd=$(find -L /proc/[0-9]*/fd /proc/[0-9]*/task/[0-9]*/fd -mindepth 1 -maxdepth 1 -samefile "$p" -print -quit 2>/dev/null || true)
  if [ -n "$fd" ]; then fd=${fd#/proc/}; WHY="open in process ${fd%%/*}"; return 0; fi
  majmin=$(printf '%02x:%02x' "$(( ((dev >> 8) & 0xfff) | ((dev >> 32) & ~0xfff) ))" "$(( (dev & 0xff) | ((dev >> 12) & ~0xff) ))")
  m=$(grep -lsE "^[^ ]+ [^ ]+ [^ ]+ $majmin $ino( |\$)" /proc/[0-9]*/maps /proc/[0-9]*/task/[0-9]*/maps 2>/dev/null | head -n 1 || true)
  if [ -n "$m" ]; then m=${m#/proc/}; WHY="mapped by process ${m%%/*}"; return 0; fi
  return 1
}
`,
	"lease_rm": `# lease_rm probe|rm PATH INODE DEV: asks the kernel, through perl, for
# the write lease it grants only when nothing else anywhere has the file
# open or mapped (any process, thread, PID namespace or container, a
# descriptor in flight in a socket's queue, an io_uring registered file, a
# loop device). Root without CAP_LEASE asks as the file's owner (the
# kernel checks the filesystem uid). PATH is opened without following a
# symlink, as an O_PATH descriptor first, and must be the file INODE on
# device DEV. With rm, while the lease is held, the file is moved into a
# private 0700 directory beside it, checked there to be the leased inode
# (a name swapped meanwhile brings another file, which is put back) and
# unlinked there. Exit status: 0 free (and removed, with rm), 3 held,
# 4 changed, 6 gone, 7 swapped (put back), 8 swapped and not put back (its
# path is printed), 9 unlinked but the file still has a name; anything
# else: no lease here.
lease_rm() {
  command -v perl >/dev/null 2>&1 || return 5
  perl -e '
    use strict; use warnings; use Fcntl qw(O_RDONLY O_NOFOLLOW O_NONBLOCK O_NOCTTY);
    $SIG{IO} = "IGNORE";   # a broken lease signals its holder
    my ($mode, $p, $ino, $dev) = @ARGV;
    my $same = sub { my @s = @_; return @s && -f _ && $s[0] == $dev && $s[1] == $ino };
    my @l = lstat($p) or exit 6;
    exit 4 unless !-l _ && $same->(@l);
    sysopen(my $ph, $p, 010000000 | O_NOFOLLOW) or exit($!{ENOENT} ? 6 : 5);   # O_PATH
    exit 4 unless $same->(stat($ph));
    my $fh;
    unless (sysopen($fh, "/proc/self/fd/" . fileno($ph), O_RDONLY | O_NONBLOCK | O_NOCTTY)) {
      exit 3 if $!{EWOULDBLOCK};
      exit 5 unless $!{ENOENT};
      # No /proc: open the name again and check it is the same file.
      sysopen($fh, $p, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW) or exit($!{EWOULDBLOCK} ? 3 : 5);
      exit 4 unless $same->(stat($fh));
    }
    my $uid = (stat($fh))[4];
    unless (fcntl($fh, 1024, 1)) {   # F_SETLEASE F_WRLCK
      exit 3 if $!{EAGAIN} || $!{EBUSY};
      exit 5 unless ($!{EACCES} || $!{EPERM}) && $> == 0 && $uid != 0;
      $> = $uid;   # the effective uid sets the filesystem uid
      exit 5 if $> != $uid;
      my $ok = fcntl($fh, 1024, 1);
      my $busy = $!{EAGAIN} || $!{EBUSY};
      $> = 0;
      exit 5 if $> != 0;
      exit($busy ? 3 : 5) unless $ok;
    }
    exit 0 if $mode ne "rm";
    exit 3 if fcntl($fh, 1025, 0) != 1;   # F_GETLEASE: an open began
    my ($d, $n) = $p =~ m{^(.*)/([^/]+)$} ? ($1, $2) : (".", $p);
    my $start = 0;
    if (open(my $st, "<", "/proc/self/stat")) { my $s = <$st>; $s =~ s/^.*\) //; $start = (split / /, $s)[19] // 0 }
    my $priv;
    for (1 .. 8) {
      my $c = sprintf("%s/nccl-ncclwiz-rm-%d-%d-%08x", $d, $$, $start, int(rand(4294967295)));
      if (mkdir($c, 0700)) { $priv = $c; last }
      exit 5 unless $!{EEXIST};
    }
    exit 5 unless defined $priv;
    my @ps = lstat($priv);
    unless (@ps && -d _ && $ps[4] == $> && ($ps[2] & 077) == 0) { rmdir $priv; exit 5 }
    rename($p, "$priv/$n") or do { rmdir $priv; exit 5 };
    my $back = sub {
      if (link("$priv/$n", $p)) { unlink("$priv/$n"); rmdir($priv); exit $_[0] }
      print "$priv/$n\n"; exit 8;
    };
    my @m = lstat("$priv/$n");
    $back->(7) unless @m && !-l _ && $same->(@m);
    $back->(3) if fcntl($fh, 1025, 0) != 1;
    unlink("$priv/$n") or $back->(5);
    rmdir($priv);
    exit 9 if (stat($fh))[3] != 0;   # the leased file still has a name somewhere
    exit 0;
  ' "$@"
}
`,
	"remove_unused": `# remove_unused PATH INODE: removes PATH only if it is still the planned
# file, no process this shell can see holds it (shm_holder: an O_PATH
# descriptor the lease does not see) and the kernel grants the exclusive
# lease (lease_rm), held from before the last check until after the
# unlink. Where no lease can be taken (no perl, neither the owner nor
# CAP_LEASE nor root), the file is kept: a /proc scan cannot see a
# descriptor in flight over a socket, an io_uring registered file or a
# loop device, so it proves nothing — "ncclwiz fix" keeps such files too.
remove_unused() {
  local rc=0 mode=probe left
  if [ ! -e "$1" ] && [ ! -L "$1" ]; then say "  already gone: $1"; return 0; fi
  if ! shm_file "$1" "$2"; then say "  kept $1: $WHY"; return 0; fi
  if shm_holder "$1"; then say "  kept $1: $WHY"; return 0; fi
  if [ "$APPLY" = 1 ]; then mode='rm'; fi
  left=$(lease_rm "$mode" "$1" "$2" "$SHM_DEV") || rc=$?
  case $rc in
    0)
      if [ "$APPLY" = 1 ]; then say "  + $(show rm -- "$1")   (kernel lease: nothing had it open)"; CHANGED=$((CHANGED + 1))
      else say "  would run: $(show rm -- "$1")   (unused now: the kernel granted an exclusive lease)"; fi ;;
    3) say "  kept $1: open elsewhere (the kernel refused an exclusive lease)" ;;
    4) say "  kept $1: it changed since it was planned" ;;
    6) say "  already gone: $1" ;;
    7) say "  kept $1: another file had taken its name at that moment (a rename swapped them); put back untouched" ;;
    8) say "  FAILED: a file that had taken the name $1 could not be put back: it is now $left"; FAILED=$((FAILED + 1)) ;;
    9) say "  removed the name $1, yet the file still has another name: nothing was freed"; FAILED=$((FAILED + 1)) ;;
    *)
      if command -v perl >/dev/null 2>&1; then WHY="neither its owner, CAP_LEASE nor root may take one here"; else WHY="perl, which takes it, is not installed"; fi
      say "  kept $1: not proven unused: no kernel lease ($WHY), and a /proc scan is no proof" ;;
  esac
  return 0
}
`,
	"same_proc": `# same_proc PID START: PID is still the running process that started at
# START (field 22 of /proc/PID/stat), not a new one that reused the PID.
same_proc() {
  local s fields
  { s=$(<"/proc/$1/stat"); } 2>/dev/null || return 1
  s=${s##*) }
  read -r -a fields <<<"$s"
  [ "${fields[0]:-}" != Z ] && [ "${fields[0]:-}" != X ] && [ "${fields[19]:-}" = "$2" ]
}
`,
	"stop_rank": `# stop_rank PID START DESCRIPTION: SIGTERM to that very process, then wait
# up to 10 s. It never sends SIGKILL: that is left to you, with the command.
stop_rank() {
  local i
  if ! same_proc "$1" "$2"; then say "  pid $1 has already ended"; return 0; fi
  act kill -TERM "$1"
  [ "$APPLY" = 1 ] || return 0
  for ((i = 0; i < 100; i++)); do
    if ! same_proc "$1" "$2"; then say "  pid $1 ended"; return 0; fi
    sleep 0.1
  done
  say "  pid $1 ($3) is still running after SIGTERM; it was not killed."
  say "  To force it: kill -KILL $1   (first check it is the same process: ps -o pid,lstart,args -p $1)"
}
`,
	"remount_shm": `# remount_shm DIR SIZE BYTES: grows the tmpfs at DIR to SIZE, unless it is
# no longer a tmpfs or is already at least that big.
remount_shm() {
  local fs blocks bsize
  fs=$(stat -f -c %T -- "$1" 2>/dev/null) || fs=missing
  if [ "$fs" != tmpfs ]; then say "  $1 is not a tmpfs ($fs); not remounted"; return 0; fi
  read -r blocks bsize <<<"$(stat -f -c '%b %S' -- "$1")"
  if [ "$blocks" = 0 ]; then say "  $1 has no size limit; not remounted"; return 0; fi
  if [ $((blocks * bsize)) -ge "$3" ]; then say "  $1 is already $((blocks * bsize >> 20)) MiB"; return 0; fi
  act mount -o "remount,size=$2" "$1"
}
`,
	"fstab_set": `# fstab_set FILE MOUNTPOINT SIZE OPTIONS: sets size=SIZE on the tmpfs entry
# of MOUNTPOINT in FILE, or appends "tmpfs MOUNTPOINT tmpfs OPTIONS,size=SIZE 0 0".
# It refuses a file it cannot parse (or a symlink), writes a backup first,
# replaces the file in one rename, and changes nothing if it already says so.
fstab_set() {
  local file=$1 mp=$2 size=$3 opts=$4 tmp new err src=$1
  if [ -L "$file" ]; then say "  $file is a symlink (managed elsewhere); not edited"; FAILED=$((FAILED + 1)); return 0; fi
  [ -e "$file" ] || src=/dev/null
  tmp=$(mktemp "${TMPDIR:-/tmp}/ncclwiz-fstab.XXXXXX")
  if ! err=$(awk -v mp="$mp" -v size="$size" -v opts="$opts" '
    function clean(p) { while (length(p) > 1 && substr(p, length(p), 1) == "/") p = substr(p, 1, length(p) - 1); return p }
    /^[ \t]*(#|$)/ { print; next }
    {
      if (NF < 4 || NF > 6) { bad = "line " NR " has " NF " fields"; print; next }
      if ($2 !~ /^\// && $2 != "none" && $2 != "swap") { bad = "line " NR ": the mount point is not a path"; print; next }
      if ((NF >= 5 && $5 !~ /^[0-9]+$/) || (NF == 6 && $6 !~ /^[0-9]+$/)) { bad = "line " NR ": freq or passno is not a number"; print; next }
      if (clean($2) != mp) { print; next }
      n++
      if ($3 != "tmpfs") { bad = mp " is a " $3 " entry, not tmpfs"; print; next }
      k = split($4, o, ","); s = ""; set = 0
      for (i = 1; i <= k; i++) {
        if (o[i] ~ /^size=/) { if (set) continue; o[i] = "size=" size; set = 1 }
        s = s (s == "" ? "" : ",") o[i]
      }
      if (!set) s = s ",size=" size
      if (s != $4) $4 = s
      print
    }
    END {
      if (bad != "") { print bad > "/dev/stderr"; exit 3 }
      if (n > 1) { print mp " is listed " n " times" > "/dev/stderr"; exit 3 }
      if (n == 0) { print "# added by ncclwiz: room for NCCL'"'"'s shared-memory segments"; print "tmpfs " mp " tmpfs " opts ",size=" size " 0 0" }
    }' "$src" 2>&1 >"$tmp"); then
    say "  $file was not edited, ncclwiz cannot parse it: $err"
    rm -f -- "$tmp"; FAILED=$((FAILED + 1)); return 0
  fi
  if [ -e "$file" ] && [ "$(cat -- "$file"; printf x)" = "$(cat -- "$tmp"; printf x)" ]; then
    say "  $file already sets size=$size for $mp"; rm -f -- "$tmp"; return 0
  fi
  if [ "$APPLY" != 1 ]; then
    say "  would change $file so that it reads:"
    grep -F -- " $mp " "$tmp" | while IFS= read -r l; do say "    $l"; done
    rm -f -- "$tmp"; return 0
  fi
  if [ -e "$file" ]; then act cp -p -- "$file" "$file.ncclwiz-$(date -u +%Y%m%dT%H%M%SZ).bak"; fi
  if ! new=$(mktemp "${file%/*}/.fstab.ncclwiz.XXXXXX"); then
    say "  $file was not edited: no temporary file next to it"; rm -f -- "$tmp"; FAILED=$((FAILED + 1)); return 0
  fi
  if ! cat -- "$tmp" >"$new"; then
    say "  $file was not edited: writing $new failed"; rm -f -- "$tmp" "$new"; FAILED=$((FAILED + 1)); return 0
  fi
  rm -f -- "$tmp"
  if [ -e "$file" ]; then
    act chmod --reference="$file" -- "$new"
    act chown --reference="$file" -- "$new"
  else
    act chmod 0644 -- "$new"
  fi
  act mv -f -- "$new" "$file"
  # After a failed mv (a busy or read-only target) the temporary copy goes too.
  rm -f -- "$new"
}
`,
	"put_file": `# put_file PATH CONTENT: writes CONTENT to PATH (mode 0644) unless it holds
# exactly that already; a different file of that name is backed up first.
# Succeeds when it wrote (or, in a dry run, would write).
put_file() {
  local p=$1 want=$2 tmp
  if [ -f "$p" ] && [ ! -L "$p" ] && [ "$(cat -- "$p"; printf x)" = "${want}x" ]; then say "  $p is already in place"; return 1; fi
  if [ "$APPLY" != 1 ]; then
    say "  would write $p:"
    printf '%s' "$want" | while IFS= read -r l; do say "    $l"; done
    return 0
  fi
  act mkdir -p -- "${p%/*}"
  if [ -e "$p" ] || [ -L "$p" ]; then act cp -P -p -- "$p" "$p.ncclwiz-$(date -u +%Y%m%dT%H%M%SZ).bak"; fi
  tmp=$(mktemp "${p%/*}/.ncclwiz.XXXXXX") || { say "  $p was not written: no temporary file next to it"; FAILED=$((FAILED + 1)); return 1; }
  printf '%s' "$want" >"$tmp" || { rm -f -- "$tmp"; FAILED=$((FAILED + 1)); return 1; }
  act chmod 0644 -- "$tmp"
  act mv -f -- "$tmp" "$p"
  rm -f -- "$tmp" # left only when the mv failed
}
`,
}
