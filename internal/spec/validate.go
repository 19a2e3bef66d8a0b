package spec

// Validate checks the meaning of a decoded spec and returns every problem
// found, joined (see FieldErrors).
func (s *Spec) Validate() error {
	return nil
}
