package flock

import (
	"testing"
	"time"
)

func TestExclusiveSerializes(t *testing.T) {
	dir := t.TempDir()
	release, err := Exclusive(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		r, err := Exclusive(dir)
		if err != nil {
			t.Error(err)
		} else {
			r()
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("second lock taken while the first was held")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("second lock not taken after release")
	}
}

func TestExclusiveMissing(t *testing.T) {
	if _, err := Exclusive(t.TempDir() + "/nope"); err == nil {
		t.Fatal("lock on a missing path succeeded")
	}
}
