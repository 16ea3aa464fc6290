#!/usr/bin/env bash
# make deb-test: installs dist/gin-{agent,master,tools}_*.deb on this machine
# with dpkg -i, checks the files, conffiles, the gin-master user and state
# dir, the units (enabled, not started; systemd-analyze verify), lintian (no
# errors or warnings), runs the installed binaries (the master as its user
# on its data dir), then removes and purges them and checks what each step
# leaves. Needs root, dpkg, lintian and systemd-analyze. It changes the
# machine (that is the point): run it on CI or a throw-away host; it refuses
# when a gin package is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "deb-test: FAIL: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || fail "needs root (dpkg -i)"
for c in dpkg dpkg-deb lintian systemd-analyze setpriv; do
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
cleanup() {
  [[ -n ${master_pid:-} ]] && kill "$master_pid" 2>/dev/null || true
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
  /etc/default/gin-agent /etc/default/gin-master \
  "/usr/lib/$multiarch/libnccl-tuner-gin.so" "/usr/lib/$multiarch/libnccl-tuner-gin-go.so" \
  /usr/lib/gin/slurm/gin-prolog.sh /usr/lib/gin/slurm/gin-epilog.sh \
  /usr/share/man/man8/gin-master.8.gz /usr/share/man/man8/gin-agent.8.gz /usr/share/man/man1/ginctl.1.gz \
  /usr/share/doc/gin-master/copyright /usr/share/doc/gin-master/changelog.Debian.gz; do
  [[ -e $f ]] || fail "$f is missing after dpkg -i"
done
[[ $(readlink "/usr/lib/$multiarch/libnccl-tuner.so") == libnccl-tuner-gin.so ]] || fail "libnccl-tuner.so does not link to libnccl-tuner-gin.so"
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
# The master as its unit runs it: user gin-master, /var/lib/gin-master
# (ports of its own so it cannot collide with anything on the machine).
setpriv --reuid gin-master --regid gin-master --init-groups /usr/bin/gin-master --node-id pkgtest --bind 127.0.0.1:0 \
  --raft-bind 127.0.0.1:0 --http-bind 127.0.0.1:0 --data-dir /var/lib/gin-master >"$work/master.log" 2>&1 &
master_pid=$!
addr=
for _ in $(seq 1 600); do
  [[ -n $addr ]] || addr=$(sed -n 's/.*msg="gin-master serving".* grpc=\([^ ]*\).*/\1/p' "$work/master.log" | head -1)
  if [[ -n $addr ]] && /usr/bin/ginctl --master "$addr" --timeout 2s members -o json >"$work/members" 2>&1 &&
    grep -q '"leader": *true' "$work/members"; then break; fi
  kill -0 "$master_pid" 2>/dev/null || { cat "$work/master.log"; fail "the installed gin-master exited"; }
  sleep 0.1
done
grep -q '"leader": *true' "$work/members" 2>/dev/null || { cat "$work/master.log"; fail "the installed gin-master has no leader after 60 s (ginctl members: $(cat "$work/members" 2>/dev/null))"; }
grep -q '"pkgtest"' "$work/members" || fail "ginctl members does not list pkgtest: $(cat "$work/members")"
[[ $(stat -c %U /var/lib/gin-master/wal) == gin-master ]] || fail "the Raft log is not owned by gin-master"
kill -TERM "$master_pid"; wait "$master_pid" || fail "gin-master did not stop cleanly on SIGTERM: $(tail -5 "$work/master.log")"
master_pid=

echo "== dpkg -r (conffiles and data stay)"
echo 'GIN_MASTER_OPTS="--log-level debug"' >> /etc/default/gin-master
dpkg -r gin-agent gin-master gin-tools
for f in /usr/bin/gin-agent /usr/bin/gin-master /usr/bin/ginctl /lib/systemd/system/gin-master.service "/usr/lib/$multiarch/libnccl-tuner.so"; do
  [[ ! -e $f && ! -L $f ]] || fail "$f is still there after dpkg -r"
done
grep -q 'log-level debug' /etc/default/gin-master || fail "dpkg -r did not keep the edited /etc/default/gin-master"
[[ -d /var/lib/gin-master/wal ]] || fail "dpkg -r removed the Raft data (only purge may)"

echo "== dpkg -P (everything goes but the user)"
dpkg -P gin-agent gin-master gin-tools
for f in /etc/default/gin-agent /etc/default/gin-master /var/lib/gin-master \
  /etc/systemd/system/multi-user.target.wants/gin-agent.service /etc/systemd/system/multi-user.target.wants/gin-master.service; do
  [[ ! -e $f && ! -L $f ]] || fail "$f is still there after dpkg -P"
done
getent passwd gin-master >/dev/null || fail "purge removed the gin-master user (Debian keeps system users)"
echo "deb-test: OK ($(basename -a "${debs[@]}" | tr '\n' ' '))"
