"""NVIDIA's Xid catalog as a table: what an ``NVRM: Xid`` number means and whose fault it is.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (Ampere and newer, including
PCIe GPUs), https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, read in
the edition that lists Xids 1-172 and whose "Xid 154 linkage" column runs to "CUDA 12.9;
GPU driver R575" (the catalog spreadsheet is https://docs.nvidia.com/Xid-Catalog.xlsx).
``name`` is the catalog's *Description* column (its *Mnemonic* is in the comment of each
row); ``action`` is its *Resolution Bucket (Immediate Action)*, shortened, with the
investigatory action or trigger text where it decides what to do. Rows the catalog marks
"Unused" on Ampere and newer are left out, except a few still seen on older GPUs, which
take their name from the older "Xid Error Listing" (r555, Sep 2024,
https://docs.nvidia.com/deploy/xid-errors/index.html) and are UNKNOWN.

How the class is decided, from the catalog's own words, in this order:

- APPLICATION: the trigger conditions put the cause on the user application ("general user
  application faults" 13, "typically ... application-level bugs" 31 and 137, "a user
  application error" 43), or the immediate action is RESTART_APP and nothing in the
  catalog says the application is not the cause (94 "contained to one application, the
  application ... must be restarted").
- HARDWARE: the catalog names a hardware fault (uncorrectable ECC / DBE, memory remapping
  *failure*, NVLink link fault, the GPU gone from PCIe, missing auxiliary power, a security
  fault "uncommon unless there is a hardware failure"), the immediate action is a reset,
  reboot or support (RESET_GPU, RESTART_BM, WORKFLOW_XID_48, WORKFLOW_NVLINK_ERR,
  CHECK_MECHANICALS) and no application cause is given. Events that only *record* a
  hardware repair (63 remapping event, 92 single-bit ECC rate, 121 corrected C2C errors,
  156 resource retirement) are not failures: UNKNOWN.
- DRIVER: the catalog names driver, firmware or GSP code ("Driver firmware error",
  "Illegal access by driver", GSP 119/120 "an error occurs in code running on the GSP
  core" with INVESTIGATE_SW, vGPU UPDATE_SWFW, MSE firmware 150), or the older listing
  gives a driver error as the only cause (44, 46).
- UNKNOWN: everything else, including sympathetic Xids that follow another one (45, 154),
  Xids whose meaning depends on a subcode to decode (NVLink5 144-149), and rows where the
  catalog says RESTART_APP but rules out the application (32 "generally not caused by user
  application actions") or gives no cause at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class XidClass(StrEnum):
    """Whose fault an Xid is, by NVIDIA's catalog."""

    HARDWARE = "hardware"
    DRIVER = "driver"
    APPLICATION = "application"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Xid:
    """One row of the catalog: the number, its description, its class, what to do."""

    number: int
    name: str
    cls: XidClass
    #: The catalog's recommended (immediate) action, short.
    action: str


_H, _D, _A, _U = XidClass.HARDWARE, XidClass.DRIVER, XidClass.APPLICATION, XidClass.UNKNOWN
_UNUSED = "CONTACT_SUPPORT (catalog: unused on Ampere and newer GPUs)"
_NVLINK5 = "WORKFLOW_NVLINK5_ERR: decode the subcode (fatal ones RESET_GPU, non-fatal IGNORE)"

_ROWS = (
    # ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT
    Xid(8, "GPU stopped processing", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    # ROBUST_CHANNEL_GR_ERROR_MISSING_HW
    Xid(11, "Invalid or corrupted push buffer stream", _A, "RESTART_APP; check the CUDA app"),
    # ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY: "general user
    # application faults ... out-of-bounds ... illegal instruction"; WORKFLOW_XID_13.
    Xid(13, "Graphics Engine Exception", _A, "RESTART_APP; debug the app (compute-sanitizer)"),
    # ROBUST_CHANNEL_FAKE_ERROR: "Fake or injected error from userspace".
    Xid(14, "Fake or injected error from userspace", _U, "IGNORE"),
    # ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY
    Xid(25, "Invalid or illegal push buffer stream", _A, "RESTART_APP; check the CUDA app"),
    # ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT: "Typically these are application-level bugs";
    # WORKFLOW_XID_31 (repeated faults on the same GPU: run diagnostics).
    Xid(31, "GPU memory page fault", _A, "RESTART_APP; debug the illegal address in the app"),
    # ROBUST_CHANNEL_PBDMA_ERROR: RESTART_APP, but "primarily involve quality issues on PCI,
    # and are generally not caused by user application actions".
    Xid(32, "Invalid or corrupted push buffer stream", _U, "RESTART_APP; PCIe quality, not app"),
    # ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD
    Xid(37, "Driver firmware error", _D, "IGNORE; check the CUDA app if it persists"),
    # ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT
    Xid(38, "Driver firmware error", _D, "IGNORE; CONTACT_SUPPORT if it persists"),
    # ROBUST_CHANNEL_CE0_ERROR .. CE2_ERROR
    Xid(39, "Copy Engine Exception", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    Xid(40, "Copy Engine Exception", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    Xid(41, "Copy Engine Exception", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    # ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR: "a user application hits a software induced
    # fault and must terminate. The GPU remains in a healthy state."
    Xid(43, "GPU stopped processing", _A, "IGNORE: the app faulted and must exit; GPU healthy"),
    # ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW (older listing: driver error only)
    Xid(44, "Graphics Engine fault during context switch", _D, "IGNORE; CONTACT_SUPPORT"),
    # ROBUST_CHANNEL_PREEMPTIVE_REMOVAL: the driver tore the app down (Ctrl-C, reset,
    # SIGKILL, or an earlier Xid); WORKFLOW_XID_45.
    Xid(
        45,
        "Preemptive cleanup, due to previous errors",
        _U,
        "WORKFLOW_XID_45: follow the Xid before it (solo: RESTART_FM)",
    ),
    # ROBUST_CHANNEL_GPU_TIMEOUT_ERROR (older listing: driver error only)
    Xid(46, "GPU stopped processing", _D, "RESET_GPU; CONTACT_SUPPORT if it persists"),
    # ROBUST_CHANNEL_GPU_ECC_DBE: "an uncorrectable error occurs on the GPU"
    Xid(
        48,
        "Double Bit ECC Error",
        _H,
        "WORKFLOW_XID_48: RESET_GPU (with 63/64: drain and reset); SRAM over threshold: RMA",
    ),
    # SILENT_RUNNING_PWR_REDUCED_CLOCKING
    Xid(54, "Auxiliary power is not connected to the GPU board", _H, "CHECK_MECHANICALS"),
    # DISPLAY_CHANNEL_EXCEPTION, FB_LINK_TRAINING_FAILURE_ERROR, FB_MEMORY_ERROR: unused on
    # Ampere and newer; names from the older listing.
    Xid(56, "Display Engine error", _U, _UNUSED),
    Xid(57, "Error programming video memory interface", _U, _UNUSED),
    Xid(58, "Unstable video memory interface detected", _U, _UNUSED),
    # ROBUST_CHANNEL_SEC2_ERROR
    Xid(60, "Video processor exception", _A, "RESTART_APP; INVESTIGATE_SW"),
    # PMU_BREAKPOINT: unused on Ampere and newer.
    Xid(61, "Internal micro-controller breakpoint/warning", _U, _UNUSED),
    # PMU_HALT_ERROR (older listing: hardware, driver or thermal)
    Xid(62, "Internal micro-controller halt", _U, "RESET_GPU; CONTACT_SUPPORT if it persists"),
    # INFOROM_DRAM_RETIREMENT_EVENT: the remap / retirement was recorded, not a failure.
    Xid(
        63,
        "GPU memory remapping event",
        _U,
        "IGNORE: row remapping or page retirement recorded; reset the GPU to activate",
    ),
    # INFOROM_DRAM_RETIREMENT_FAILURE
    Xid(64, "GPU memory remapping failure", _H, "RESET_GPU; CONTACT_SUPPORT (remap failed)"),
    # ROBUST_CHANNEL_NVENC1_ERROR: unused on Ampere and newer.
    Xid(65, "Video processor exception", _U, _UNUSED),
    # ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION, ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION
    Xid(66, "Illegal access by driver", _D, "IGNORE; INVESTIGATE_SW"),
    Xid(67, "Illegal access by driver", _D, "IGNORE; CONTACT_SUPPORT if it persists"),
    # ROBUST_CHANNEL_NVDEC0_ERROR
    Xid(68, "NVDEC0 Exception", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    # ROBUST_CHANNEL_GR_CLASS_ERROR
    Xid(69, "Graphics Engine class error", _A, "RESTART_APP; check the CUDA app"),
    # ROBUST_CHANNEL_CE3_ERROR .. CE5_ERROR
    Xid(70, "CE3: Unknown Error", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    Xid(71, "CE4: Unknown Error", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    Xid(72, "CE5: Unknown Error", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    # ROBUST_CHANNEL_NVENC2_ERROR: unused on Ampere and newer.
    Xid(73, "NVENC2 Error", _U, _UNUSED),
    # NVLINK_ERROR: "may indicate a hardware failure with the link itself, or ... the
    # device at the remote end of the link"
    Xid(
        74,
        "NVLINK Error",
        _H,
        "WORKFLOW_NVLINK_ERR: reset the GPU or reboot the node; CONTACT_SUPPORT if it repeats",
    ),
    # ROBUST_CHANNEL_CE6_ERROR .. CE8_ERROR
    Xid(75, "CE6: Unknown Error", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    Xid(76, "CE7: Unknown Error", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    Xid(77, "CE8: Unknown Error", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    # VGPU_START_ERROR
    Xid(78, "vGPU Start Error", _D, "UPDATE_SWFW: update the driver and firmware"),
    # ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS: "often caused by hardware failures on the
    # PCI Express link"
    Xid(79, "GPU has fallen off the bus", _H, "RESTART_BM: reboot the node; CONTACT_SUPPORT"),
    # PBDMA_PUSHBUFFER_CRC_MISMATCH (older listing: hardware, driver, memory or bus; no app)
    Xid(80, "Corrupted data sent to GPU", _U, "RESTART_APP; check the CUDA app"),
    # ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR: unused on Ampere and newer.
    Xid(81, "VGA Subsystem Error", _U, _UNUSED),
    # ROBUST_CHANNEL_NVJPG0_ERROR, NVDEC1/2, CE9, OFA0, NVDEC3/4
    Xid(82, "NVJPG0 Error", _A, "RESTART_APP"),
    Xid(83, "NVDEC1 Error", _A, "RESTART_APP"),
    Xid(84, "NVDEC2 Error", _A, "RESTART_APP"),
    Xid(85, "CE9: Unknown Error", _A, "RESTART_APP; CONTACT_SUPPORT if it persists"),
    Xid(86, "OFA Exception", _A, "RESTART_APP"),
    Xid(88, "NVDEC3 Error", _A, "RESTART_APP"),
    Xid(89, "NVDEC4 Error", _A, "RESTART_APP"),
    # EXCESSIVE_SBE_INTERRUPTS: corrected errors.
    Xid(92, "High single-bit ECC error rate", _U, "IGNORE; CONTACT_SUPPORT if it persists"),
    # INFOROM_ERASE_LIMIT_EXCEEDED: "the intentional use of the InfoROM wear protection"
    Xid(
        93,
        "Non-fatal violation of provisioned InfoROM wear limit",
        _U,
        "IGNORE; clear the limit with nvflash --elsessionclear",
    ),
    # ROBUST_CHANNEL_CONTAINED_ERROR: "contained to one application ... must be restarted.
    # All other applications ... are unaffected."
    Xid(
        94,
        "Contained memory error",
        _A,
        "RESTART_APP (only the app that hit it); reset the GPU when convenient",
    ),
    # ROBUST_CHANNEL_UNCONTAINED_ERROR: "affect multiple applications, and the affected GPU
    # must be reset"
    Xid(95, "Uncontained memory error", _H, "RESET_GPU before applications can restart"),
    # ROBUST_CHANNEL_NVDEC5..7_ERROR, NVJPG1..7_ERROR
    Xid(96, "NVDEC5 Error", _A, "RESTART_APP"),
    Xid(97, "NVDEC6 Error", _A, "RESTART_APP"),
    Xid(98, "NVDEC7 Error", _A, "RESTART_APP"),
    Xid(99, "NVJPG1 Error", _A, "RESTART_APP"),
    Xid(100, "NVJPG2 Error", _A, "RESTART_APP"),
    Xid(101, "NVJPG3 Error", _A, "RESTART_APP"),
    Xid(102, "NVJPG4 Error", _A, "RESTART_APP"),
    Xid(103, "NVJPG5 Error", _A, "RESTART_APP"),
    Xid(104, "NVJPG6 Error", _A, "RESTART_APP"),
    Xid(105, "NVJPG7 Error", _A, "RESTART_APP"),
    # SMBPBI_TEST_MESSAGE, SMBPBI_TEST_MESSAGE_SILENT
    Xid(106, "SMBPBI Test Message", _U, "IGNORE"),
    Xid(107, "SMBPBI Test Message Silent", _U, "IGNORE"),
    # ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR (older listing: any cause, the app included)
    Xid(109, "Context Switch Timeout Error", _U, "RESET_GPU; CONTACT_SUPPORT if it persists"),
    # SEC_FAULT_ERROR: "uncommon unless there is a hardware failure"
    Xid(110, "Security Fault Error", _H, "RESET_GPU (cold reset); contact the hardware vendor"),
    # GSP_RPC_TIMEOUT, GSP_ERROR: "an error occurs in code running on the GSP core of the
    # GPU and/or a timeout occurs while waiting for the GSP core ... to respond"
    Xid(119, "GSP RPC Timeout", _D, "RESET_GPU; INVESTIGATE_SW (power cycle if it persists)"),
    Xid(120, "GSP Error", _D, "RESET_GPU; INVESTIGATE_SW (power cycle if it persists)"),
    # C2C_ERROR: "corrected by the system and have no operational impact"
    Xid(121, "C2C Error", _U, "IGNORE: corrected; reset the GPU in a service window"),
    # SPI_PMU_RPC_READ_FAIL, SPI_PMU_RPC_WRITE_FAIL: unused on Ampere and newer.
    Xid(122, "SPI PMU RPC Read Failure", _U, _UNUSED),
    Xid(123, "SPI PMU RPC Write Failure", _U, _UNUSED),
    # ROBUST_CHANNEL_CE10..19_ERROR (Blackwell)
    *(
        Xid(n, f"CE{n - 116}: Unknown Error", _A, "RESTART_APP; CONTACT_SUPPORT if it persists")
        for n in range(126, 136)
    ),
    # ALI_TRAINING_FAIL
    Xid(136, "Link Training Failed", _H, "RESET_GPU; INVESTIGATE_LINK_SI"),
    # NVLINK_PRIV_ERR: "an illegal NVLink peer-to-peer access ... Typically these are
    # application-level bugs"; XID_137_FLOW.
    Xid(137, "NVLink Privilege Error", _A, "IGNORE; debug the app's NVLink P2P access"),
    # ROBUST_CHANNEL_OFA1_ERROR
    Xid(139, "OFA1 Error", _A, "RESTART_APP"),
    # UNRECOVERABLE_ECC_ERROR_ESCAPE: uncorrectable errors the driver could not retire.
    Xid(140, "ECC Unrecovered Error", _H, "RESET_GPU; contact the hardware vendor if it persists"),
    # ROBUST_CHANNEL_FAST_PATH_ERROR
    Xid(141, "CUDA Fast Path Error", _U, "IGNORE"),
    # ROBUST_CHANNEL_NVENC3_ERROR
    Xid(142, "NVENC3 Error", _U, "CONTACT_SUPPORT"),
    # GPU_INIT_ERROR
    Xid(143, "GPU Initialization Error", _U, "RESET_GPU; CONTACT_SUPPORT if it persists"),
    # NVLINK_SAW/RLW/TLW/TREX/NVLPW_CTRL/NETIR_ERROR: the "XID 144-150 Decode" sheet gives
    # fatal and non-fatal, HW and SW subcodes under each number.
    Xid(144, "NVLINK: SAW Error", _U, _NVLINK5),
    Xid(145, "NVLINK: RLW Error", _U, _NVLINK5),
    Xid(146, "NVLINK: TLW Error", _U, _NVLINK5),
    Xid(147, "NVLINK: TREX Error", _U, _NVLINK5),
    Xid(148, "NVLINK: NVLPW_CTRL Error", _U, _NVLINK5),
    Xid(149, "NVLINK: NETIR Error", _U, _NVLINK5 + "; link-down subcodes RESET_GPU"),
    # NVLINK_MSE_ERROR: both subcodes (MSE Degraded, MSE_WATCHDOG) are fatal, FW.
    Xid(150, "NVLINK: MSE Error", _D, "RESET_GPU; CONTACT_SUPPORT (MSE firmware)"),
    # ROBUST_CHANNEL_KEY_ROTATION_ERROR
    Xid(151, "Key rotation Error", _U, "RESTART_VM; CONTACT_SUPPORT"),
    # ROBUST_CHANNEL_DLA_SMMU_ERROR, ROBUST_CHANNEL_DLA_TIMEOUT
    Xid(152, "DLA SMMU Error", _U, "IGNORE"),
    Xid(153, "DLA timeout Error", _U, "IGNORE"),
    # GPU_RECOVERY_ACTION_CHANGED: "Informational only regarding another Xid"
    Xid(
        154,
        "GPU Recovery Action Changed",
        _U,
        "XID_154: take the recovery action it names for the other Xid",
    ),
    # NVLINK_SW_DEFINED_ERROR: "Link down events which are flagged as intentional"
    Xid(155, "NVLINK: SW Defined Error", _U, "RESET_GPU; INVESTIGATE_SW_USER"),
    # RESOURCE_RETIREMENT_EVENT, RESOURCE_RETIREMENT_FAILURE ("You may still run workloads")
    Xid(156, "Resource Retirement Event", _U, "RESET_GPU to activate the retirement"),
    Xid(157, "Resource Retirement Failure", _U, "IGNORE; CONTACT_SUPPORT (no spare resources)"),
    # GPU_FATAL_TIMEOUT
    Xid(158, "GPU Fatal Timeout", _U, "RESET_GPU; CONTACT_SUPPORT if it persists"),
    # ROBUST_CHANNEL_CHI_NON_DATA_ERROR
    Xid(159, "CHI Non-Data Error", _U, "CHECK_UVM: RESET_GPU if UVM/vGPU is used, else IGNORE"),
    # CHANNEL_RETIREMENT_EVENT, CHANNEL_RETIREMENT_FAILURE
    Xid(160, "Channel Retirement Event", _U, "IGNORE; INVESTIGATE_SW"),
    Xid(161, "Channel Retirement Failure", _U, "IGNORE; INVESTIGATE_SW"),
    # PSHC_*: power smoothing hardware circuitry (no resolution bucket in the catalog).
    Xid(162, "Power Smoothing HW Circuitry capability reengaged", _U, "none given"),
    Xid(163, "Power Smoothing HW Circuitry capability disengaged", _U, "no GPU reset required"),
    Xid(164, "Power Smoothing HW Circuitry low lifetime reached", _U, "monitor power swings"),
    Xid(165, "Power Smoothing HW Circuitry lifetime exhausted", _U, "replace if swings matter"),
    # NVLINK_SECURE_CRYPTO_ERR, NVLINK_SECURE_OTHER: confidential computing mode only.
    Xid(166, "CC traffic before the link is set up for encryption", _U, "CC mode only"),
    # PCIE_FATAL_TIMEOUT (no resolution bucket in the catalog)
    Xid(167, "PCIE_FATAL_TIMEOUT", _U, "none given"),
    # REDUCED_GPU_MEMORY_CAPACITY: "Should only be seen when ECC is disabled"
    Xid(168, "Errors found in WPR (write protected region)", _U, "enable ECC or retry boot"),
    # SEC2_HALT_ERROR (no resolution bucket in the catalog)
    Xid(169, "Internal micro-controller halt", _U, "none given"),
    Xid(170, "Interrupt seen in CC mode", _U, "CC mode only"),
    # UNCORRECTABLE_DRAM_ERROR, UNCORRECTABLE_SRAM_ERROR: "Additional to Xid 48".
    Xid(171, "Uncorrectable DRAM error (detail of Xid 48)", _H, "follow Xid 48 (WORKFLOW_XID_48)"),
    Xid(172, "Uncorrectable SRAM error (detail of Xid 48)", _H, "follow Xid 48 (WORKFLOW_XID_48)"),
)

#: The catalog by Xid number.
XIDS: Mapping[int, Xid] = MappingProxyType({row.number: row for row in _ROWS})


def lookup(number: int) -> Xid:
    """The catalog's row for ``number``, or an UNKNOWN row for a number it does not list."""
    found = XIDS.get(number)
    if found is not None:
        return found
    return Xid(
        number,
        "unknown Xid",
        XidClass.UNKNOWN,
        "not in NVIDIA's Xid catalog (R575): see the driver's release notes",
    )
