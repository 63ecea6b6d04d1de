package dataset

// The row shapes a reader is asked for, and the one of its own fields whose
// prompt is made by prompt.messages (package dataset/template).

import (
	"fmt"

	"github.com/synthgen/synthgen/dataset/shape"

	"github.com/synthgen/synthgen/dataset/template"
)

// The row shapes Options.Format names (package dataset/shape reads them).
const (
	FormatAuto        = shape.FormatAuto
	FormatShareGPT    = shape.FormatShareGPT
	FormatMessages    = shape.FormatMessages
	FormatPrompt      = shape.FormatPrompt
	FormatAlpaca      = shape.FormatAlpaca
	FormatOpenAIBatch = shape.FormatOpenAIBatch
	FormatRows        = shape.FormatRows
)

// checkTemplate checks that a template and the row shape agree, and makes
// auto mean rows when a template is set (so that a row's id is its index
// or id_field, never a batch row's custom_id).
func (o *Options) checkTemplate() error {
	switch {
	case len(o.Template) == 0 && o.Format == FormatRows:
		return fmt.Errorf("dataset format rows: the prompt is made by %s, and it is empty: set it, or choose the rows' shape", template.Key)
	case len(o.Template) == 0:
		return nil
	case o.Format == FormatAuto:
		o.Format = FormatRows
	case o.Format != FormatRows:
		return fmt.Errorf("dataset format %s with %s: a template makes the prompt of a row's fields, the %s shape of its own turns: set dataset.format to auto or rows, or remove %s", o.Format, template.Key, o.Format, template.Key)
	}
	if o.Conversations {
		return fmt.Errorf("%s with generation.turns all: a template makes one prompt per row, and turns all regenerates a dataset's own conversations: use turns first", template.Key)
	}
	return nil
}
