package lab

import (
	"context"
	"errors"
	"fmt"

	"github.com/srchain/srchain/internal/apply"
)

// Reapply applies the recorded desired state to every node of lab again,
// repairing what drifted (an interface set down, a route deleted). It
// returns the number of changes per node; nodes already as desired get 0.
// A node that fails is rolled back by the applier and reported; the
// others are still applied.
func Reapply(ctx context.Context, lab string, opts Options) (map[string]int, error) {
	rec, err := Load(lab, opts)
	if err != nil {
		return nil, err
	}
	changes := map[string]int{}
	var errs []error
	for _, n := range rec.Network.Nodes {
		ns, err := Open(lab, n.Name, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res, err := apply.ApplyWith(ctx, ns, n, apply.Options{Drivers: opts.Drivers, Logger: opts.Logger})
		ns.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changes[n.Name] = res.Changes
	}
	if err := errors.Join(errs...); err != nil {
		return changes, fmt.Errorf("reapply lab %s: %w", lab, err)
	}
	return changes, nil
}
