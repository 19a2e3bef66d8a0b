package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/srchain/srchain/internal/controller"
)

// newRotateCmd rotates OPoT keys through the controller.
func newRotateCmd(e *env) *cobra.Command {
	var o remoteOptions
	var chains []string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Give OPoT chains new keys through the controller, without dropping packets",
		Long: "rotate asks the controller (`srchain serve`) for new OPoT keys: every chain with\n" +
			"opot: true, or those named with --chain. The new profile goes to the slot the\n" +
			"headend does not use on every node of the chain; once their agents applied it,\n" +
			"the headend switches to it (docs/opot.md \"Rotation\"). If an agent does not\n" +
			"report within --wait, the headend is not switched: run it again.\n" +
			"`srchain lab rotate` does the same for a lab.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.client()
			if err != nil {
				return err
			}
			body, err := json.Marshal(struct {
				Chains      []string `json:"chains,omitempty"`
				WaitSeconds float64  `json:"wait_seconds,omitempty"`
			}{chains, wait.Seconds()})
			if err != nil {
				return err
			}
			var res controller.RotateResult
			if err := cl.Do(cmd.Context(), "POST", "/v1/opot/rotate", body, &res); err != nil {
				return err
			}
			for _, r := range res.Rotations {
				fmt.Fprintf(cmd.OutOrStdout(), "chain %s: new keys in slot %d on %s; headend %s starts packets with slot %d (revisions %d, %d)\n",
					r.Chain, r.Slot, strings.Join(r.Nodes, ", "), r.Headend, r.Slot, res.Keys, res.Switch)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&chains, "chain", nil, "rotate only this chain (repeatable)")
	cmd.Flags().DurationVar(&wait, "wait", controller.DefaultRotateWait, "how long the controller waits for the agents (at most 10m)")
	o.flags(cmd)
	return cmd
}
