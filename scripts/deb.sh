#!/usr/bin/env bash
# Build the srchain Debian package with dpkg-deb from a staged root
# (docs/packaging.md says why dpkg-deb and not nfpm).
#
#   scripts/deb.sh [OUTDIR]             OUTDIR/srchain_VERSION_ARCH.deb
#   scripts/deb.sh --bin-only [OUTDIR]  only the static binary OUTDIR/srchain
#   scripts/deb.sh --print-version      VERSION, Debian version, file name
#
# OUTDIR defaults to dist. The binary's version is
# `git describe --tags --always --dirty` (VERSION=... overrides it), the
# package's is that version in Debian's syntax (deb_version below).
# SOURCE_DATE_EPOCH (default: the last commit's time) dates the man pages
# and clamps the files' mtimes, so two builds of one commit are equal.
# DEB_COMPRESS (default gzip) is dpkg-deb's -Z.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
find_go

mode=deb
case ${1:-} in
--bin-only) mode=bin; shift ;;
--print-version) mode=version; shift ;;
esac
out=${1:-dist}

# TAGGED=no says a given VERSION is a bare commit id (tests).
tagged=${TAGGED:-yes}
tag=
if [ -z "${VERSION:-}" ]; then
	VERSION=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
	tag=$(git describe --tags --abbrev=0 2>/dev/null) || tagged=no
fi
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

# build_srchain OUT: the static binary. CGO_ENABLED=0 leaves no libc
# dependency (the .deb then needs no Depends on libc6), -trimpath keeps the
# build directory out of it, -s -w drops the symbol tables (stack traces
# still resolve: Go keeps its pclntab).
build_srchain() {
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$1" ./cmd/srchain
}


# deb_version VERSION: Debian's version syntax (deb-version(5)) takes
# [A-Za-z0-9.+~] and must start with a digit; a hyphen would start a
# Debian revision. A tag v1.2.0 plus 3 commits, dirty, becomes
# 1.2.0+3.g6460e7f.dirty (sorts after 1.2.0); with no tag at all the
# commit id gets 0~gitDATE. in front, so later commits sort later.
deb_version() {
	local v=$1 base rest
	if [ "$tagged" = no ]; then
		printf '0~git%s.%s\n' "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M%S)" "$(printf %s "$v" | tr -c 'A-Za-z0-9.+~\n' '.')"
		return
	fi
	base=${v%%-*}
	case $v in "$tag"?*) [ -n "$tag" ] && base=$tag ;; esac # tags may hold hyphens
	rest=${v#"$base"}
	base=${base#v}
	case $base in [0-9]*) ;; *) base="0~$base" ;; esac
	if [ -n "$rest" ]; then
		rest="+$(printf %s "${rest#-}" | tr -c 'A-Za-z0-9.+~\n' '.')"
	fi
	printf '%s%s\n' "$(printf %s "$base" | tr -c 'A-Za-z0-9.+~\n' '.')" "$rest"
}

arch=$(go env GOARCH)
case $arch in
386) debarch=i386 ;;
arm) debarch=armhf ;;
*) debarch=$arch ;; # amd64, arm64, riscv64, ppc64le, s390x: same names
esac
debver=$(deb_version "$VERSION")
debname=srchain_${debver}_${debarch}.deb
case $mode in
version)
	printf '%s %s %s\n' "$VERSION" "$debver" "$debname"
	exit 0
	;;
bin)
	mkdir -p "$out"
	build_srchain "$out/srchain"
	echo "$out/srchain ($VERSION)"
	exit 0
	;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/etc/srchain" "$root/etc/iproute2/rt_protos.d" \
	"$root/usr/share/man/man1" "$root/usr/share/bash-completion/completions" \
	"$root/usr/share/zsh/vendor-completions" "$root/usr/share/doc/srchain"

build_srchain "$root/usr/bin/srchain"
# Man pages and completion come from the command tree itself; cross
# builds generate them with a host binary.
gen=$root/usr/bin/srchain
if [ "$arch" != "$(GOARCH= go env GOHOSTARCH)" ]; then
	gen=$stage/srchain-host
	GOARCH= go build -o "$gen" ./cmd/srchain
fi
"$gen" gen-man "$stage/man"
for page in "$stage"/man/*.1; do
	gzip -9n <"$page" >"$root/usr/share/man/man1/$(basename "$page").gz"
done
"$gen" completion bash >"$root/usr/share/bash-completion/completions/srchain"
"$gen" completion zsh >"$root/usr/share/zsh/vendor-completions/_srchain"

install -m 0644 packaging/systemd/srchain-agent.service packaging/systemd/srchain-serve.service "$root/lib/systemd/system/"
install -m 0644 packaging/etc/agent.yaml packaging/etc/serve.yaml "$root/etc/srchain/"
install -m 0644 packaging/etc/iproute2/srchain.conf "$root/etc/iproute2/rt_protos.d/srchain.conf"
install -m 0644 packaging/copyright "$root/usr/share/doc/srchain/copyright"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$root/DEBIAN/"
install -m 0644 packaging/debian/conffiles "$root/DEBIAN/conffiles"
chmod 0644 "$root"/usr/share/bash-completion/completions/* "$root"/usr/share/zsh/vendor-completions/*

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$debver/" -e "s/@ARCH@/$debarch/" -e "s/@SIZE@/$size/" \
	packaging/debian/control.in >"$root/DEBIAN/control"

deb=$out/$debname
# gzip rather than dpkg-deb's default xz: on the 33 MB binary xz saves
# 27% (8.7 MB against 12.0 MB) but takes ~18 s against ~2 s here, and CI
# builds this package in every run. DEB_COMPRESS=xz for a release
# (docs/packaging.md).
dpkg-deb "-Z${DEB_COMPRESS:-gzip}" --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
