package store

import (
	"context"
	"errors"
	"io"
)

// source is where one scan's chunks come from: the file while no writer
// holds it, else the writer's answer to req, opened at the first chunk it
// serves and read on by the following ones.
type source struct {
	r      *Reader
	ctx    context.Context
	req    readRequest
	fileFn func(j *Journal) fillFunc

	fr     *frameReader // the writer's answer, while one is open
	closer io.Closer
	at     uint64 // the position fr's next record has
	ended  bool   // fr sent its 'E': it has no more
}

func (r *Reader) source(ctx context.Context, req readRequest, fileFn func(j *Journal) fillFunc) *source {
	return &source{r: r, ctx: ctx, req: req, fileFn: fileFn}
}

func (s *source) close() {
	if s.closer != nil {
		_ = s.closer.Close()
		s.closer, s.fr = nil, nil
	}
}

// fill is a fillFunc over the source. A chunk begun through a writer
// that stops in its middle is completed from the file, or the next
// writer, from where it broke off.
func (s *source) fill(ctx context.Context, c *chunk, next uint64) (uint64, error) {
	var after uint64
	var ferr error
	err := s.r.retry(ctx, func() error {
		if s.fr == nil || s.at != next {
			err := s.r.onFile(func(j *Journal) error {
				after, ferr = s.fileFn(j)(ctx, c, next) // seals c
				return nil
			})
			if !errors.Is(err, errWriter) {
				return err
			}
			s.close() // an answer at another position, or ended
			s.ended = false
			req := s.req
			req.From = next
			fr, closer, err := s.r.open(ctx, req)
			if err != nil {
				return err
			}
			s.fr, s.closer, s.at = fr, closer, next
		}
		if s.ended {
			c.seal()
			after = next
			return nil
		}
		rerr := readRecords(s.fr, c, &next, readChunk)
		s.at = next
		switch {
		case rerr == nil:
			s.ended = true
		case errors.Is(rerr, errMore):
		case errors.Is(rerr, errGone):
			s.close()
			return errGone // retry goes on from next with what c holds
		default:
			ferr = rerr
			s.ended = true
		}
		c.seal()
		after = next
		return nil
	})
	if err != nil {
		c.seal()
		return next, err
	}
	return after, ferr
}
