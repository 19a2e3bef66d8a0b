package main

import (
	"strings"
	"testing"
)

func TestLabCLIErrors(t *testing.T) {
	dir := t.TempDir()
	t.Cleanup(func() { labStateDir = "" })
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "status", "--state-dir", dir, "nosuch"}, "no such lab"},
		{[]string{"lab", "down", "--state-dir", dir, "nosuch"}, "no such lab"},
		{[]string{"lab", "exec", "--state-dir", dir, "nosuch", "h1", "--", "true"}, "no such lab"},
		{[]string{"lab", "status", "--state-dir", dir, "../x"}, "bad lab or node name"},
		{[]string{"lab", "trace", "--state-dir", dir, "nosuch"}, "no such lab"},
		{[]string{"lab", "up", "--state-dir", dir, "/nonexistent.yaml"}, "invalid spec"},
		{[]string{"demo", "--state-dir", dir, "/nonexistent.yaml"}, "invalid spec"},
	} {
		out, errOut, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("srchain %s: error %v, want %q (output %q %q)", strings.Join(c.args, " "), err, c.want, out, errOut)
		}
	}
	out, _, err := runCLI(t, "lab", "status", "--state-dir", dir)
	if err != nil || out != "" {
		t.Errorf("lab status with no labs = %q, %v", out, err)
	}
}

func TestLabNameFromFile(t *testing.T) {
	name, err := labName("../../examples/quickstart.yaml")
	if err != nil || name != "quickstart" {
		t.Errorf("labName(quickstart.yaml) = %q, %v", name, err)
	}
	if name, _ := labName("mylab"); name != "mylab" {
		t.Errorf("labName(mylab) = %q", name)
	}
}
