package lab

// The lab's tests load example specs: link every NF kind in, as the CLI.
import _ "github.com/srchain/srchain/internal/kinds/all"
