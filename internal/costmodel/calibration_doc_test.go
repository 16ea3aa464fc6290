package costmodel

import (
	"fmt"
	"os"
	"strings"
	"text/template"
)

// measuredMargin mirrors plan.MeasuredMargin (in percent) for the doc; the
// plan package cannot be imported here (it imports this one).
const measuredMargin = 5.0

// calibrationTemplate is the text of docs/CALIBRATION.md, with the
// generated tables and figures as {{.Name}} fields.
const calibrationTemplate = "testdata/calibration.md.tmpl"

// renderDoc is docs/CALIBRATION.md: the template filled with the generated
// tables, the model's constants and calibRegion (internal/calib's part, as
// the file has it). Each pair table ends with its held-out count, which the
// doc shows apart, under the held-out results.
func renderDoc(table, heldOut, pairs, b200, calibRegion, nvlsPairs, treeForms, treeChoices, nvlsBefore, regimes, devOverrides string) (string, error) {
	src, err := os.ReadFile(calibrationTemplate)
	if err != nil {
		return "", err
	}
	tmpl, err := template.New("calibration").Option("missingkey=error").Parse(string(src))
	if err != nil {
		return "", fmt.Errorf("%s: %w", calibrationTemplate, err)
	}
	ringTree, ringTreeHeld, ok1 := strings.Cut(pairs, "\n\nHeld out: ")
	nvls, nvlsHeld, ok2 := strings.Cut(nvlsPairs, "\n\nHeld out: ")
	nvlsHeld, margins, ok3 := strings.Cut(nvlsHeld, " Margins: ")
	if !ok1 || !ok2 || !ok3 {
		return "", fmt.Errorf("a pair table lost its held-out line")
	}
	nvls += "\n\nMargins: " + margins
	var b strings.Builder
	err = tmpl.Execute(&b, map[string]string{
		"Model":            ModelVersion,
		"NVLinkSM80":       fmt.Sprintf("%.3f", nvlinkFactor(80)),
		"NVLinkSM90":       fmt.Sprintf("%.3f", nvlinkFactor(90)),
		"NVLinkSM100":      fmt.Sprintf("%.3f", nvlinkFactor(100)),
		"PCIe":             fmt.Sprintf("%.2f", pciFactor),
		"NICGBps":          fmt.Sprintf("%.2f", NICGBpsPerGbps),
		"SwitchHopUs":      fmt.Sprintf("%.1f", SwitchHopLatencyUs),
		"EthernetUs":       fmt.Sprintf("%.1f", EthernetLatencyUs),
		"LLStepUs":         fmt.Sprintf("%.1f", NVLinkLLStepUs),
		"NVLSSwitch":       fmt.Sprintf("%.4f", NVLSSwitchFactor),
		"NVLSChunkUs":      fmt.Sprintf("%.4f", NVLSChunkUs),
		"NVLSTreeFillUs":   fmt.Sprintf("%.1f", NVLSTreeFillUs),
		"PairMinMargin":    fmt.Sprintf("%.0f", pairMinMargin),
		"PairTieMargin":    fmt.Sprintf("%.0f", pairTieMargin),
		"MeasuredMargin":   fmt.Sprintf("%.0f", measuredMargin),
		"TreeForms":        treeForms,
		"Table":            table,
		"HeldOut":          heldOut,
		"TreeChoices":      treeChoices,
		"B200":             b200,
		"RingTreePairs":    ringTree,
		"RingTreeHeldOut":  "Held out: " + ringTreeHeld,
		"NVLSPairs":        nvls,
		"NVLSPairsHeldOut": "Held out: " + nvlsHeld,
		"NVLSBefore":       nvlsBefore,
		"Regimes":          regimes,
		"DevOverrides":     devOverrides,
		"CalibRegion":      calibRegion,
	})
	return b.String(), err
}
