package apply

// Some tests apply the End program: link the NF kinds in, as the CLI.
import _ "github.com/srchain/srchain/internal/kinds/all"
