#!/usr/bin/env bash
# make deb-test: installs dist/gin-{agent,master,tools}_*.deb on this machine
# with dpkg -i, checks the files, conffiles, the gin-master user and state
# dir, the units (enabled, not started; systemd-analyze verify), lintian (no
# errors or warnings), runs the installed binaries (the master as its user
# on its data dir: first as installed, which must refuse to start without
# certificates, exit 78; then with certificates made by the installed ginctl
# in /etc/gin, as its /etc/default file says), then removes and purges them
# and checks what each step leaves. Needs root, dpkg, lintian and systemd-analyze. It changes the
# machine (that is the point): run it on CI or a throw-away host; it refuses
# when a gin package is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "deb-test: FAIL: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || fail "needs root (dpkg -i)"
for c in dpkg dpkg-deb lintian systemd-analyze setpriv unshare ip; do
  command -v "$c" >/dev/null || fail "$c is not installed"
done
shopt -s nullglob
debs=(dist/gin-agent_*.deb dist/gin-master_*.deb dist/gin-tools_*.deb)
[[ ${#debs[@]} == 3 ]] || fail "want exactly three packages in dist/ (make deb), have: ${debs[*]:-none}"
for p in gin-agent gin-master gin-tools; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
    fail "$p is already installed here; deb-test installs and purges, run it on a clean machine"
  fi
done
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
work=$(mktemp -d)
# The certificates this test makes in /etc/gin (removed again before dpkg -r).
tls_files() { ls /etc/gin/ca.pem /etc/gin/ca-key.pem /etc/gin/admin.pem /etc/gin/admin-key.pem /etc/gin/master-"$(hostname)".pem /etc/gin/master-"$(hostname)"-key.pem 2>/dev/null || true; }
[[ -e /etc/gin/ca.pem ]] && fail "/etc/gin/ca.pem exists here; deb-test makes its own CA there, run it on a clean machine"
cleanup() {
  tls_files | xargs -r rm -f
  dpkg -P gin-agent gin-master gin-tools >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== lintian"
lintian --fail-on error,warning "${debs[@]}" 2>&1 | tee "$work/lintian" \
  || fail "lintian reported errors or warnings"

echo "== dpkg -i"
DEBIAN_FRONTEND=noninteractive dpkg -i --force-confdef --force-confold "${debs[@]}"

echo "== files"
for f in /usr/bin/gin-agent /usr/bin/gin-master /usr/bin/ginctl \
  /lib/systemd/system/gin-agent.service /lib/systemd/system/gin-master.service \
  /etc/default/gin-agent /etc/default/gin-master /etc/gin \
  "/usr/lib/$multiarch/libnccl-tuner-gin.so" "/usr/lib/$multiarch/libnccl-tuner-gin-go.so" \
  "/usr/lib/$multiarch/libnccl-profiler-gin.so" \
  /usr/lib/gin/slurm/gin-prolog.sh /usr/lib/gin/slurm/gin-epilog.sh \
  /usr/share/man/man8/gin-master.8.gz /usr/share/man/man8/gin-agent.8.gz /usr/share/man/man1/ginctl.1.gz \
  /usr/share/doc/gin-master/copyright /usr/share/doc/gin-master/changelog.Debian.gz; do
  [[ -e $f ]] || fail "$f is missing after dpkg -i"
done
[[ $(readlink "/usr/lib/$multiarch/libnccl-tuner.so") == libnccl-tuner-gin.so ]] || fail "libnccl-tuner.so does not link to libnccl-tuner-gin.so"
[[ $(readlink "/usr/lib/$multiarch/libnccl-profiler.so") == libnccl-profiler-gin.so ]] || fail "libnccl-profiler.so does not link to libnccl-profiler-gin.so"
for p in gin-agent gin-master; do
  dpkg-query -W -f='${Conffiles}\n' "$p" | grep -q "/etc/default/$p " || fail "/etc/default/$p is not a conffile of $p"
done

echo "== gin-master user and state dir"
getent passwd gin-master >/dev/null || fail "no gin-master user"
[[ $(stat -c %U:%G /var/lib/gin-master) == gin-master:gin-master ]] || fail "/var/lib/gin-master is owned by $(stat -c %U:%G /var/lib/gin-master)"
grep -q '^User=gin-master$' /lib/systemd/system/gin-master.service || fail "gin-master.service does not run as gin-master"

echo "== units: enabled, not started, verified"
for u in gin-agent gin-master; do
  [[ -L /etc/systemd/system/multi-user.target.wants/$u.service ]] || fail "$u.service is not enabled"
  if command -v systemctl >/dev/null; then
    [[ $(systemctl is-enabled "$u.service" 2>/dev/null || true) == enabled ]] || fail "systemctl is-enabled $u: $(systemctl is-enabled "$u.service" 2>&1 || true)"
  fi
  if pgrep -f "^/usr/bin/$u( |$)" >/dev/null; then fail "dpkg -i started /usr/bin/$u"; fi
done
out=$(systemd-analyze verify --man=no /lib/systemd/system/gin-agent.service /lib/systemd/system/gin-master.service 2>&1) \
  || fail "systemd-analyze verify: $out"
if grep -q "gin-" <<<"$out"; then fail "systemd-analyze verify: $out"; fi

echo "== the installed binaries"
for b in gin-agent gin-master ginctl; do
  "/usr/bin/$b" --version | grep -q . || fail "$b --version printed nothing"
done
/usr/bin/gin-agent --once -o json --source sim:dgx-h100 > "$work/agent.json" || fail "gin-agent --once failed"
grep -q '"gpus"' "$work/agent.json" || fail "gin-agent --once -o json has no gpus: $(head -c 300 "$work/agent.json")"
# The master as its unit runs it, with nothing added: the unit's own
# ExecStart, its EnvironmentFile (/etc/default/gin-master as installed),
# user gin-master, /var/lib/gin-master, default ports and node id. systemd
# is not PID 1 here, so the unit's line runs under setpriv in a network
# namespace of its own with one NIC and a default route (a fresh host), so
# the default ports cannot collide with anything on this machine.
command -v unshare >/dev/null && command -v ip >/dev/null || fail "unshare and ip are needed to run the unit's command line"
execstart=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/gin-master.service)
[[ $execstart == /usr/bin/gin-master* ]] || fail "unexpected ExecStart: $execstart"
grep -q '^RestartPreventExitStatus=.*\b78\b' /lib/systemd/system/gin-master.service || fail "gin-master.service restarts on exit 78 (no certificates)"
! grep -Eq '^RestartPreventExitStatus=(.* )?(2|75)( |$)' /lib/systemd/system/gin-master.service || fail "gin-master.service does not restart on exit 2 (a Go panic) or 75 (data dir full)"
# As installed (no certificates, no --insecure): a clear refusal, exit 78,
# which the unit does not restart on; nothing listens.
rc=0
unshare --net bash -c "set -a; . /etc/default/gin-master; set +a; exec setpriv --reuid gin-master --regid gin-master --init-groups $execstart" \
  >"$work/refused.log" 2>&1 || rc=$?
[[ $rc == 78 ]] || fail "the unit's ExecStart without certificates exited $rc, want 78: $(cat "$work/refused.log")"
grep -q 'no TLS certificates.*ginctl tls ca create.*--insecure' "$work/refused.log" || fail "the refusal does not name the certificates, ginctl tls and --insecure: $(cat "$work/refused.log")"
echo "without certificates the unit's command line refused to start (exit 78): $(head -c 160 "$work/refused.log")..."
# Certificates as /etc/default/gin-master says: made with the installed
# ginctl (the CA too, here), the key readable by group gin-master, the three
# GIN_TLS_* lines uncommented with this master's name (its host name).
host=$(hostname)
/usr/bin/ginctl tls init --dir /etc/gin --cert "master/$host=10.78.0.2" --cert admin >/dev/null || fail "ginctl tls init"
chgrp gin-master "/etc/gin/master-$host-key.pem" && chmod 0640 "/etc/gin/master-$host-key.pem"
sed -i -e 's/^#\(GIN_TLS_[A-Z]*=\)/\1/' -e "s/master-NAME/master-$host/" /etc/default/gin-master
[[ $(grep -c '^GIN_TLS_' /etc/default/gin-master) == 3 ]] || fail "/etc/default/gin-master has no three GIN_TLS_* lines to uncomment"
admin="--tls-ca /etc/gin/ca.pem --tls-cert /etc/gin/admin.pem --tls-key /etc/gin/admin-key.pem"
cat >"$work/unit.sh" <<SCRIPT
set -eu
ip link set lo up
ip link add eth0 type veth peer name uplink0
ip addr add 10.78.0.2/24 dev eth0
ip link set uplink0 up
ip link set eth0 up
ip route add default via 10.78.0.1
set -a; . /etc/default/gin-master; set +a
eval "exec setpriv --reuid gin-master --regid gin-master --init-groups $execstart" >"$work/master.log" 2>&1 &
pid=\$!
for _ in \$(seq 1 600); do
  if /usr/bin/ginctl $admin --timeout 2s members -o json >"$work/members" 2>&1 && grep -q '"leader": *true' "$work/members"; then break; fi
  kill -0 "\$pid" 2>/dev/null || { echo "gin-master exited"; exit 3; }
  sleep 0.1
done
grep -q '"leader": *true' "$work/members" || { echo "no leader after 60 s"; exit 4; }
kill -TERM "\$pid"
wait "\$pid"
SCRIPT
unshare --net --pid --fork bash "$work/unit.sh" || { cat "$work/master.log"; fail "the unit's ExecStart did not start, lead and stop cleanly: $(cat "$work/members" 2>/dev/null)"; }
grep -q '"address": *"10.78.0.2:5001"' "$work/members" || fail "the Raft address was not derived from the default route: $(cat "$work/members")"
[[ $(stat -c %U /var/lib/gin-master/wal) == gin-master ]] || fail "the Raft log is not owned by gin-master"
grep -q 'gRPC with mTLS' "$work/master.log" || fail "the master did not serve mutual TLS: $(cat "$work/master.log")"
echo "the unit's command line ($execstart) started with mTLS, led and stopped on SIGTERM as gin-master"
tls_files | xargs -r rm -f

echo "== dpkg -r (conffiles and data stay)"
echo 'GIN_MASTER_OPTS="--log-level debug"' >> /etc/default/gin-master
dpkg -r gin-agent gin-master gin-tools
for f in /usr/bin/gin-agent /usr/bin/gin-master /usr/bin/ginctl /lib/systemd/system/gin-master.service "/usr/lib/$multiarch/libnccl-tuner.so"; do
  [[ ! -e $f && ! -L $f ]] || fail "$f is still there after dpkg -r"
done
grep -q 'log-level debug' /etc/default/gin-master || fail "dpkg -r did not keep the edited /etc/default/gin-master"
[[ -d /var/lib/gin-master/wal ]] || fail "dpkg -r removed the Raft data (only purge may)"

echo "== dpkg -P (everything goes but the user)"
dpkg -P gin-agent gin-master  # gin-tools has no conffiles: dpkg -r removed it fully
st=$(dpkg-query -W -f='${Status}' gin-tools 2>/dev/null || true)
[[ -z $st || $st == *not-installed ]] || fail "gin-tools after dpkg -r: $st"
for f in /etc/default/gin-agent /etc/default/gin-master /var/lib/gin-master /etc/gin \
  /etc/systemd/system/multi-user.target.wants/gin-agent.service /etc/systemd/system/multi-user.target.wants/gin-master.service; do
  [[ ! -e $f && ! -L $f ]] || fail "$f is still there after dpkg -P"
done
getent passwd gin-master >/dev/null || fail "purge removed the gin-master user (Debian keeps system users)"
echo "deb-test: OK ($(basename -a "${debs[@]}" | tr '\n' ' '))"
