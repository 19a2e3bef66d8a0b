package controller

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Errors of LoadOrCreateToken: a token file that is empty, readable or
// writable by group or others (or not a regular file: a symlink), or a
// token too short to resist guessing.
var (
	ErrNoToken      = errors.New("empty token file")
	ErrTokenFile    = errors.New("token file must be a regular file of mode 0600 or narrower, not a symlink")
	ErrTokenTooWeak = fmt.Errorf("token shorter than %d bytes", MinTokenLen)
)

// MinTokenLen is the shortest token the controller accepts: 16 bytes
// (128 bits if random; the generated one has 64 hex digits).
const MinTokenLen = 16

// LoadOrCreateToken reads the API token from path, creating it (32
// random bytes, hex, mode 0600) when the file does not exist. An
// existing file must be a regular file (a symlink is not followed: it
// could point the controller at any readable file, /etc/hostname made a
// token anyone knows), readable by its owner only, holding a token of at
// least MinTokenLen bytes.
func LoadOrCreateToken(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return createToken(path)
	}
	if errors.Is(err, syscall.ELOOP) {
		return "", fmt.Errorf("read token %s: %w (it is a symlink)", path, ErrTokenFile)
	}
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("read token %s: %w (it is %v; chmod 600 it)", path, ErrTokenFile, fi.Mode())
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("read token %s: %w", path, ErrNoToken)
	}
	if len(tok) < MinTokenLen {
		return "", fmt.Errorf("read token %s: %w (%d bytes)", path, ErrTokenTooWeak, len(tok))
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
			// The connection ends with the answer: one without the
			// token must not hold a keep-alive slot (issue 38, item 2).
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusUnauthorized, errorBody{Error: "missing or wrong bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
