#!/usr/bin/env bash
# Makes sure the stores the tests need answer: Redis, PostgreSQL, MariaDB;
# installs etcd-server, from which the etcd tests start their own clusters.
# For each one it uses the configured address (MUTEXFX_REDIS_ADDR,
# MUTEXFX_POSTGRES_DSN, MUTEXFX_MYSQL_DSN) or the 127.0.0.1 default; when
# nothing answers there it installs the Debian package if the server binary is
# missing and starts a server. It prints what it did and fails when a store
# still does not answer: store tests never skip.
set -euo pipefail

log() { printf 'stores: %s\n' "$*" >&2; }

apt_updated=
need_pkgs() { # need_pkgs PKG... — install the Debian packages that are missing
	local missing=()
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" != 0 ]; then log "missing packages ${missing[*]} and not root"; return 1; fi
	if [ -z "$apt_updated" ]; then DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2; apt_updated=1; fi
	log "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

wait_for() { # wait_for SECONDS CMD...
	local n=$(($1 * 5)); shift
	for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	return 1
}

tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# --- Redis -------------------------------------------------------------
redis_addr=${MUTEXFX_REDIS_ADDR:-127.0.0.1:6379}
rhost=${redis_addr%:*}; rport=${redis_addr##*:}
if ! tcp_open "$rhost" "$rport"; then
	need_pkgs redis-server redis-tools
	log "starting redis-server on $redis_addr"
	mkdir -p /var/lib/redis /var/log/redis
	redis-server --daemonize yes --bind "$rhost" --port "$rport" --save "" --appendonly no \
		--dir /var/lib/redis --logfile /var/log/redis/mutexfx.log >&2
	wait_for 10 tcp_open "$rhost" "$rport" || { log "redis does not answer on $redis_addr"; exit 1; }
fi
command -v redis-server >/dev/null || need_pkgs redis-server redis-tools # throwaway servers in fault tests
log "redis ok at $redis_addr"

# --- PostgreSQL --------------------------------------------------------
pg_dsn=${MUTEXFX_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
if [ -z "${MUTEXFX_POSTGRES_DSN:-}" ]; then
	if ! tcp_open 127.0.0.1 5432; then
		need_pkgs postgresql postgresql-client
		ver=$(ls /etc/postgresql | sort -V | tail -1)
		if [ -z "$ver" ]; then log "no PostgreSQL cluster after install"; exit 1; fi
		# trust auth on loopback for the test user, as on the development machines
		hba=/etc/postgresql/$ver/main/pg_hba.conf
		grep -q 'mutexfx' "$hba" || sed -i '1i # mutexfx tests\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$hba"
		log "starting PostgreSQL $ver"
		pg_ctlcluster --skip-systemctl-redirect "$ver" main start >&2 || true
		wait_for 20 tcp_open 127.0.0.1 5432 || { log "postgres does not answer"; exit 1; }
	fi
	command -v psql >/dev/null || need_pkgs postgresql-client
	psql -h 127.0.0.1 -U postgres -d postgres -tAc "select 1 from pg_database where datname='test'" | grep -q 1 ||
		psql -h 127.0.0.1 -U postgres -d postgres -c 'create database test' >&2
fi
# throwaway servers in fault tests need initdb and pg_ctl
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_pkgs postgresql
log "postgres ok"

# --- MariaDB -----------------------------------------------------------
if [ -z "${MUTEXFX_MYSQL_DSN:-}" ]; then
	if ! tcp_open 127.0.0.1 3306; then
		need_pkgs mariadb-server mariadb-client
		log "starting mariadbd"
		mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
		start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql >&2
		wait_for 30 tcp_open 127.0.0.1 3306 || { log "mariadb does not answer"; exit 1; }
	fi
	mariadb -h127.0.0.1 -uroot -e 'create database if not exists test' >&2 ||
		mariadb -uroot -e "create database if not exists test; alter user 'root'@'localhost' identified via mysql_native_password using password(''); flush privileges" >&2
fi
command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || need_pkgs mariadb-server
log "mariadb ok"

# --- etcd --------------------------------------------------------------
# The etcd tests start their own throwaway clusters from the etcd binary.
command -v etcd >/dev/null || need_pkgs etcd-server
log "etcd ok ($(etcd --version 2>/dev/null | head -1))"
