// Package devid is the one place device identities get their canonical
// form: PCI bus ids ("0000:07:00.0", as sysfs writes them) and InfiniBand
// GUIDs (16 lower-case hex digits). Discovery (sysfs, NVML), the graph and
// the exports all compare identities through it, so that an id written by
// NVML, by sysfs, by ibnetdiscover or by an operator's file means the same
// device everywhere. It imports nothing of ours.
package devid
