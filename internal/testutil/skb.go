package testutil

// SKB is struct __sk_buff (Linux 6.x: 192 bytes) as the context of a tc
// program's BPF_PROG_TEST_RUN. A test run takes Mark, Priority,
// IngressIfindex, Ifindex, CB, Tstamp, WireLen, GSOSegs, GSOSize and
// Hwtstamp from it (the kernel refuses other non-zero fields); GSOSegs
// and GSOSize make the packet a GSO packet of that many segments.
type SKB struct {
	Len, PktType, Mark, QueueMapping, Protocol, VlanPresent, VlanTCI, VlanProto, Priority uint32
	IngressIfindex, Ifindex, TCIndex                                                      uint32
	CB                                                                                    [5]uint32
	Hash, TCClassid, Data, DataEnd, NapiID, Family, RemoteIP4, LocalIP4                   uint32
	RemoteIP6, LocalIP6                                                                   [4]uint32
	RemotePort, LocalPort, DataMeta                                                       uint32
	FlowKeys, Tstamp                                                                      uint64
	WireLen, GSOSegs                                                                      uint32
	SK                                                                                    uint64
	GSOSize                                                                               uint32
	TstampType                                                                            uint8
	_                                                                                     [3]uint8
	Hwtstamp                                                                              uint64
}
