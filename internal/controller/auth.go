package controller

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoToken: a token file that is empty.
var ErrNoToken = errors.New("empty token file")

// LoadOrCreateToken reads the API token from path, creating it (32
// random bytes, hex, mode 0600) when the file does not exist.
func LoadOrCreateToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createToken(path)
	}
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("read token %s: %w", path, ErrNoToken)
	}
	return tok, nil
}

func createToken(path string) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	tok := hex.EncodeToString(raw[:])
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create token directory: %w", err)
	}
	// O_EXCL: never overwrite a token another process just wrote.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	_, werr := f.WriteString(tok + "\n")
	if err := errors.Join(werr, f.Close()); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	return tok, nil
}

// requireToken answers 401 to every request without "Authorization:
// Bearer TOKEN". Both sides are hashed first so that the comparison takes
// the same time whatever the length or content of the guess.
func requireToken(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme is case-insensitive (RFC 7235 section 2.1).
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		ok := strings.EqualFold(scheme, "Bearer")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || token == "" || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="srchain"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{Error: "missing or wrong bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
