#!/usr/bin/env bash
# Installs the Debian packages tilemark's test rigs and benchmarks use, if missing:
# fio (reference benchmark), nbdkit + nbdfuse (slow/failing storage), chromium (the headless
# browser the report tests open reports in, through Playwright), postgresql and rocksdb-tools
# (the real applications tilemark learn is checked against), pngquant (`make screenshots`
# keeps the report screenshots in docs/ small), xfsprogs (file workloads on an xfs loop device).
# Needs root and apt;
# without them it says what is missing and the tests that need it skip with that reason.
set -u
need=()
command -v fio >/dev/null || need+=(fio)
command -v nbdkit >/dev/null || need+=(nbdkit)
command -v nbdfuse >/dev/null || need+=(libnbd-bin)
command -v fusermount3 >/dev/null || need+=(fuse3)
[ -x /usr/bin/chromium ] || need+=(chromium)
ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1 || need+=(postgresql)
command -v db_bench >/dev/null || need+=(rocksdb-tools)
command -v pngquant >/dev/null || need+=(pngquant)
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "system-deps: missing ${need[*]}; not root or no apt-get, tests needing them will skip" >&2
  exit 0
fi
echo "system-deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 || echo "system-deps: apt-get install ${need[*]} failed" >&2
exit 0
