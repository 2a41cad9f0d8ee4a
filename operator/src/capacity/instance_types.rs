//! The embedded instance-type table and what a node of each type keeps for itself.
//!
//! Sizes (vCPUs, memory in GiB, architecture) are AWS's published specifications of the memory
//! optimized families, <https://docs.aws.amazon.com/ec2/latest/instancetypes/mo.html>: every
//! size of r8g, r7g, r7i, r6g and r6i from `large` to `16xlarge` has 8 GiB per vCPU.
//!
//! What the node keeps is what an EKS node computes at boot, from the EKS AMI's bootstrap
//! (awslabs/amazon-eks-ami, `templates/al2/runtime/bootstrap.sh`, functions
//! `get_memory_mebibytes_to_reserve` and the `evictionHard` it writes): kube-reserved memory is
//! `11 * maxPods + 255` MiB, where maxPods is the instance type's entry in the AMI's
//! `eni-max-pods.txt` (ENIs * (IPv4 addresses per ENI - 1) + 2), and the hard eviction
//! threshold is `memory.available < 100Mi`. The AMI sets no system-reserved memory. The pod
//! allocatable memory is then capacity - kube-reserved - eviction threshold.

use std::sync::OnceLock;

use crate::crd::{Arch, InstanceFamily};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// The kubelet's hard eviction threshold on an EKS node (`memory.available < 100Mi`).
pub const EVICTION_HARD_BYTES: u64 = 100 * MIB;

/// One instance type of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceType {
    /// For example `r8g.2xlarge`.
    pub name: String,
    pub family: InstanceFamily,
    pub vcpus: u32,
    pub memory_gib: u32,
    pub arch: Arch,
    /// The EKS AMI's `eni-max-pods.txt` entry for this type.
    pub max_pods: u32,
}

impl InstanceType {
    pub fn memory_bytes(&self) -> u64 {
        u64::from(self.memory_gib) * GIB
    }

    /// kube-reserved memory as the EKS AMI computes it: `11 * maxPods + 255` MiB.
    pub fn kube_reserved_bytes(&self) -> u64 {
        (11 * u64::from(self.max_pods) + 255) * MIB
    }

    /// What the node keeps from its pods: kube-reserved plus the hard eviction threshold.
    pub fn node_reserve_bytes(&self) -> u64 {
        self.kube_reserved_bytes() + EVICTION_HARD_BYTES
    }
}

/// The sizes every family of the table has: name suffix, vCPUs, memory in GiB, and maxPods
/// (`eni-max-pods.txt` gives these five families the same figures at each size).
const SIZES: [(&str, u32, u32, u32); 7] = [
    ("large", 2, 16, 29),
    ("xlarge", 4, 32, 58),
    ("2xlarge", 8, 64, 58),
    ("4xlarge", 16, 128, 234),
    ("8xlarge", 32, 256, 234),
    ("12xlarge", 48, 384, 234),
    ("16xlarge", 64, 512, 737),
];

fn arch_of(family: InstanceFamily) -> Arch {
    match family {
        InstanceFamily::R8g | InstanceFamily::R7g | InstanceFamily::R6g => Arch::Arm64,
        InstanceFamily::R7i | InstanceFamily::R6i => Arch::Amd64,
    }
}

/// Every instance type of the table, family by family, smallest first.
pub fn all() -> &'static [InstanceType] {
    static TABLE: OnceLock<Vec<InstanceType>> = OnceLock::new();
    TABLE.get_or_init(|| {
        InstanceFamily::ALL
            .into_iter()
            .flat_map(|family| {
                SIZES
                    .iter()
                    .map(move |&(size, vcpus, memory_gib, max_pods)| InstanceType {
                        name: format!("{}.{size}", family.as_str()),
                        family,
                        vcpus,
                        memory_gib,
                        arch: arch_of(family),
                        max_pods,
                    })
            })
            .collect()
    })
}

/// The instance types of one family, smallest first.
pub fn of_family(family: InstanceFamily) -> impl Iterator<Item = &'static InstanceType> {
    all().iter().filter(move |t| t.family == family)
}

/// The names the table knows, for error messages.
pub fn known_names() -> String {
    all()
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The instance type called `name`, or an error naming the known ones.
pub fn lookup(name: &str) -> Result<&'static InstanceType, String> {
    all().iter().find(|t| t.name == name).ok_or_else(|| {
        format!(
            "unknown instance type '{name}': the instance-type table knows {}",
            known_names()
        )
    })
}

/// The family of an instance type name (`r8g.4xlarge` is `r8g`), when the table knows it.
pub fn family_of(name: &str) -> Option<InstanceFamily> {
    let family = name.split('.').next()?;
    InstanceFamily::parse(family).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_large_to_16xlarge_at_8_gib_per_vcpu() {
        for family in InstanceFamily::ALL {
            let names: Vec<_> = of_family(family).map(|t| t.name.clone()).collect();
            assert_eq!(names.len(), 7, "{family}: {names:?}");
            assert_eq!(names[0], format!("{family}.large"));
            assert_eq!(names[6], format!("{family}.16xlarge"));
            for t in of_family(family) {
                assert_eq!(t.memory_gib, 8 * t.vcpus, "{}", t.name);
            }
        }
        assert_eq!(lookup("r7i.4xlarge").unwrap().arch, Arch::Amd64);
        assert_eq!(lookup("r8g.4xlarge").unwrap().arch, Arch::Arm64);
    }

    #[test]
    fn kube_reserved_follows_the_eks_formula() {
        // r8g.4xlarge: maxPods 234, so 11 * 234 + 255 = 2829 MiB, plus 100 MiB eviction.
        let t = lookup("r8g.4xlarge").unwrap();
        assert_eq!(t.kube_reserved_bytes(), 2829 * MIB);
        assert_eq!(t.node_reserve_bytes(), 2929 * MIB);
        // r6i.large: maxPods 29, 574 MiB.
        assert_eq!(
            lookup("r6i.large").unwrap().kube_reserved_bytes(),
            574 * MIB
        );
    }

    #[test]
    fn an_unknown_instance_type_is_an_error_naming_the_known_ones() {
        let err = lookup("m7g.4xlarge").unwrap_err();
        assert!(err.contains("unknown instance type 'm7g.4xlarge'"), "{err}");
        assert!(
            err.contains("r8g.large") && err.contains("r6i.16xlarge"),
            "{err}"
        );
        assert_eq!(family_of("r7g.2xlarge"), Some(InstanceFamily::R7g));
        assert_eq!(family_of("m7g.2xlarge"), None);
    }
}
