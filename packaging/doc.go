// Package packaging holds the sources of srchain's Debian package (systemd
// units, conffiles, maintainer scripts; scripts/deb.sh builds it) and the
// test that builds the package and checks what it installs. See
// docs/packaging.md.
package packaging
