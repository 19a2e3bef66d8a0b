package bpfrt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// netnsMarkerPrefix names the directory that records which namespace a
// pin directory's links belong to (bpffs holds only pins and
// directories, so the record is a directory name).
const netnsMarkerPrefix = "netns-"

// ClaimPinDir records in dir that its link pins belong to the calling
// thread's network namespace (call it inside netns.NS.Do, holding
// LockDir(dir, Exclusive)). When dir was claimed by another namespace,
// that namespace was deleted and created again under the same name (or
// the directory is reused): every link pin in it (isLinkPin says which
// names are link pins) describes an interface that no longer exists, so
// they are removed and the claim moves here; reclaimed is then true. This
// is decided by namespace identity (NetnsID), not by comparing ifindexes,
// program tags or map IDs. Other pins (maps) are kept.
func ClaimPinDir(dir string, isLinkPin func(name string) bool) (reclaimed bool, err error) {
	mine, err := netnsMarker()
	if err != nil {
		return false, fmt.Errorf("claim pin dir %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("claim pin dir %s: %w", dir, err)
	}
	var others []string
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, netnsMarkerPrefix) {
			continue
		}
		if name == mine {
			return false, nil
		}
		others = append(others, name)
	}
	if len(others) > 0 {
		var errs []error
		for _, e := range ents {
			if isLinkPin(e.Name()) {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
		if err := errors.Join(errs...); err != nil {
			return false, fmt.Errorf("claim pin dir %s: remove stale link pins: %w", dir, err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, mine), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return false, fmt.Errorf("claim pin dir %s: %w", dir, err)
	}
	for _, o := range others {
		if err := os.Remove(filepath.Join(dir, o)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("claim pin dir %s: %w", dir, err)
		}
	}
	return len(others) > 0, nil
}

// netnsMarker is the claim ClaimPinDir records for the calling thread's
// network namespace.
func netnsMarker() (string, error) {
	id, err := CurrentNetns()
	if err != nil {
		return "", err
	}
	return netnsMarkerPrefix + fmt.Sprintf("%d-%d", id.Dev, id.Ino), nil
}

// ClaimedHere reports whether dir's link pins belong to the calling
// thread's network namespace (ClaimPinDir ran for dir in it, and no other
// namespace claimed dir since). It changes nothing: a checker asks it
// before trusting a link pin, an applier calls ClaimPinDir. A dir without
// a claim (never attached from, or released) is not claimed here.
func ClaimedHere(dir string) (bool, error) {
	mine, err := netnsMarker()
	if err != nil {
		return false, fmt.Errorf("check pin dir %s claim: %w", dir, err)
	}
	_, err = os.Stat(filepath.Join(dir, mine))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check pin dir %s claim: %w", dir, err)
	}
	return true, nil
}

// IsHookPin reports whether name is a link pin named by Hook.String.
func IsHookPin(name string) bool {
	return strings.HasPrefix(name, "tcx_ingress_") || strings.HasPrefix(name, "tcx_egress_") || strings.HasPrefix(name, "xdp_")
}

// ReleasePinDir removes the namespace claim of dir (ClaimPinDir), for
// callers that remove everything they pinned there.
func ReleasePinDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release pin dir %s: %w", dir, err)
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), netnsMarkerPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("release pin dir %s: %w", dir, err)
	}
	return nil
}
