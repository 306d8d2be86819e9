package sqlite

import (
	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/store"
)

// WithBinary makes Open act as binary b (its version and compatibility
// level) instead of store.ThisBinary, with the Go migrations extra on top
// of the embedded ones: tests open a store as a newer binary would.
func WithBinary(b store.Binary, extra ...*goose.Migration) Option {
	return func(o *options) { o.binary, o.extra = b, extra }
}
