package kind

import (
	"errors"
	"slices"
	"testing"
)

// TestUndo: steps are taken back last first, their errors joined; an
// Apply that did nothing returns no undo.
func TestUndo(t *testing.T) {
	var u Undo
	if u.Result() != nil {
		t.Fatal("empty undo has a result")
	}
	var order []int
	boom := errors.New("boom")
	u.Add(func() error { order = append(order, 1); return nil })
	u.Add(func() error { order = append(order, 2); return boom })
	undo, err := u.Fail(errors.New("apply failed"))
	if undo != nil || !errors.Is(err, boom) || err.Error() != "apply failed\nboom" {
		t.Errorf("Fail = %v, %v", undo != nil, err)
	}
	if !slices.Equal(order, []int{2, 1}) {
		t.Errorf("steps ran in order %v, want [2 1]", order)
	}
	if u.Result() == nil {
		t.Error("undo with steps has no result")
	}
}
