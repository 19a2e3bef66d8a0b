package opot

import (
	"encoding/binary"
	"fmt"
)

// NodeParamsSize is the length of NodeParams' binary form.
const NodeParamsSize = 64

// AppendBinary appends n's binary form, the value of a node's OPoT
// secret in its desired state (state.Secret): role (u32), 4 zero bytes,
// then Share, LPC, Dec.R, Dec.CML, Enc.R, Enc.CML, Secret as big-endian
// u64, the field order of struct opot_params (bpf/lib/opot.h). It is
// key material: the desired state keeps it in Node.Secrets, which `plan`
// redacts and the state files hold with mode 0600.
func (n NodeParams) AppendBinary(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint32(b, uint32(n.Role))
	b = binary.BigEndian.AppendUint32(b, 0)
	for _, v := range []uint64{n.Share, n.LPC, n.Dec.R, n.Dec.CML, n.Enc.R, n.Enc.CML, n.Secret} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b, nil
}

// MarshalBinary returns n's binary form (see AppendBinary).
func (n NodeParams) MarshalBinary() ([]byte, error) {
	return n.AppendBinary(make([]byte, 0, NodeParamsSize))
}

// UnmarshalBinary reads the form MarshalBinary writes. It refuses a
// wrong length, an unknown role, padding that is not zero and values
// and a Share, LPC or Secret not canonical modulo P61 (masks are full
// 64-bit words): a hand-edited state must not load.
func (n *NodeParams) UnmarshalBinary(b []byte) error {
	if len(b) != NodeParamsSize {
		return fmt.Errorf("decode node params: %d bytes, want %d: %w", len(b), NodeParamsSize, ErrProfile)
	}
	role := binary.BigEndian.Uint32(b)
	if role < uint32(RoleHeadend) || role > uint32(RoleVerifier) || binary.BigEndian.Uint32(b[4:]) != 0 {
		return fmt.Errorf("decode node params: role %d: %w", role, ErrProfile)
	}
	var v [7]uint64
	for i := range v {
		v[i] = binary.BigEndian.Uint64(b[8+8*i:])
		if (i == 0 || i == 1 || i == 6) && v[i] >= P61 {
			return fmt.Errorf("decode node params: value %d not below p: %w", i, ErrProfile)
		}
	}
	*n = NodeParams{Role: Role(role), Share: v[0], LPC: v[1], Dec: Mask{v[2], v[3]}, Enc: Mask{v[4], v[5]}, Secret: v[6]}
	return nil
}
