//! Setting up the emulation models of an emulated NUMA topology on the
//! media: the remote-access cost ([`super::remote`]) and the per-node NVMM
//! bandwidth cap ([`super::bwcap`]). Their parameters ([`super::remote::RemoteCost`],
//! [`super::bwcap::BandwidthCap`]) live beside the code that charges them; mount options
//! name them (`crate::MountOptions`).

impl super::Media {
    /// Charge every later access to a member on another node than the
    /// accessing thread's (by `topology`) with `cost` (see
    /// [`super::remote::RemoteModel`]).
    pub fn set_remote_cost(&mut self, cost: crate::RemoteCost, topology: crate::Topology) {
        let members = self.members.iter().map(|m| (m.start, m.len, m.node));
        self.remote = Some(Box::new(super::remote::RemoteModel::new(
            cost, topology, members,
        )));
    }

    /// Limit every later access to each node's member to `cap` weighted
    /// bytes per second, all threads together (see
    /// [`super::bwcap::BandwidthModel`]).
    pub fn set_bandwidth_cap(&mut self, cap: crate::BandwidthCap, topology: crate::Topology) {
        let members = self.members.iter().map(|m| (m.start, m.len, m.node));
        self.bwcap = Some(Box::new(super::bwcap::BandwidthModel::new(
            cap, topology, members,
        )));
    }

    /// With the remote-cost model or the bandwidth cap on: make the
    /// calling thread pay for an access of `[off, off+len)`. Off: one
    /// well-predicted branch each.
    #[inline(always)]
    pub(super) fn charge(&self, off: u64, len: usize, access: super::remote::Access) {
        if let Some(m) = &self.remote {
            m.charge(off, len, access);
        }
        if let Some(b) = &self.bwcap {
            b.charge(off, len, access);
        }
    }
}
