# Shared helpers of scripts/*.sh (sourced, not run).

# need_root exits unless running as root (namespaces, BPF, sysctls).
need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "$0: run as root (sudo $0)" >&2
		exit 1
	fi
}

# find_go puts a Go toolchain on PATH (sudo's secure_path drops /usr/local/go/bin).
find_go() {
	for d in /usr/local/go/bin /usr/lib/go/bin "$HOME/go/bin"; do
		case ":$PATH:" in *":$d:"*) ;; *) [ -x "$d/go" ] && PATH="$d:$PATH" ;; esac
	done
	export PATH
	if ! command -v go >/dev/null; then
		echo "$0: no Go toolchain found (need go >= 1.25; see README.md)" >&2
		exit 1
	fi
}

# ensure_packages installs the given Debian packages that are missing, and
# does nothing (no apt-get update) when all are there.
ensure_packages() {
	local missing=()
	for p in "$@"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
			missing+=("$p")
		fi
	done
	if [ "${#missing[@]}" -eq 0 ]; then
		return 0
	fi
	echo "== installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# ensure_bpffs mounts the BPF filesystem where srchain pins its programs.
ensure_bpffs() {
	if ! mountpoint -q /sys/fs/bpf; then
		mount -t bpf bpf /sys/fs/bpf
	fi
}
