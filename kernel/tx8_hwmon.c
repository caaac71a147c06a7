// SPDX-License-Identifier: GPL-2.0-only
/*
 * TX8 board power and energy in the hwmon sysfs ABI
 * (Documentation/hwmon/sysfs-interface.rst): power1_input and
 * power1_average (uW), power1_average_interval (ms), energy1_input (uJ)
 * and the board power limit power1_cap (uW, writable by root). The figures
 * are the device's power model (docs/hardware.md section 7, interface 1.8);
 * a device of an older interface gets no hwmon device.
 *
 * energy1_input never goes backwards: when the device restarts (a new
 * boot_id, or a counter below the last one read) the energy read so far
 * becomes the base the device's new counter adds to.
 */
#include <linux/hwmon.h>
#include <linux/math64.h>
#include <linux/mutex.h>

#include "tx8_drv.h"

/* the window of the device's power_avg_mw */
#define TX8_POWER_AVERAGE_MS	1000
/* the largest cap the device takes, mW */
#define TX8_POWER_CAP_MAX_MW	1000000000ull

struct tx8_hwmon {
	struct tx8_device *tdev;
	struct mutex lock;		/* boot_id, last_uj, base_uj */
	u64 boot_id;
	u64 last_uj;
	u64 base_uj;
};

static u64 tx8_hwmon_energy(struct tx8_hwmon *hw)
{
	const struct tx8_ctrl *ctrl = hw->tdev->ctrl;
	u64 boot_id, uj, val;

	mutex_lock(&hw->lock);
	boot_id = READ_ONCE(ctrl->boot_id);
	uj = READ_ONCE(ctrl->counters.energy_uj);
	if (boot_id != hw->boot_id || uj < hw->last_uj) {
		hw->base_uj += hw->last_uj;
		hw->boot_id = boot_id;
	}
	hw->last_uj = uj;
	val = hw->base_uj + uj;
	mutex_unlock(&hw->lock);
	return val;
}

static umode_t tx8_hwmon_is_visible(const void *data,
				    enum hwmon_sensor_types type, u32 attr,
				    int channel)
{
	if (type == hwmon_energy && attr == hwmon_energy_input)
		return 0444;
	if (type != hwmon_power)
		return 0;
	switch (attr) {
	case hwmon_power_input:
	case hwmon_power_average:
	case hwmon_power_average_interval:
		return 0444;
	case hwmon_power_cap:
		return 0644;
	default:
		return 0;
	}
}

static int tx8_hwmon_read(struct device *dev, enum hwmon_sensor_types type,
			  u32 attr, int channel, long *val)
{
	struct tx8_hwmon *hw = dev_get_drvdata(dev);
	const struct tx8_counters *c = &hw->tdev->ctrl->counters;

	if (READ_ONCE(hw->tdev->lost))
		return -ENODEV;
	if (type == hwmon_energy && attr == hwmon_energy_input) {
		*val = (long)tx8_hwmon_energy(hw);
		return 0;
	}
	if (type != hwmon_power)
		return -EOPNOTSUPP;
	switch (attr) {
	case hwmon_power_input:
		*val = (long)(READ_ONCE(c->power_mw) * 1000);
		return 0;
	case hwmon_power_average:
		*val = (long)(READ_ONCE(c->power_avg_mw) * 1000);
		return 0;
	case hwmon_power_average_interval:
		*val = TX8_POWER_AVERAGE_MS;
		return 0;
	case hwmon_power_cap:
		*val = (long)(READ_ONCE(c->power_cap_mw) * 1000);
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

static int tx8_hwmon_write(struct device *dev, enum hwmon_sensor_types type,
			   u32 attr, int channel, long val)
{
	struct tx8_hwmon *hw = dev_get_drvdata(dev);
	u64 mw;

	if (type != hwmon_power || attr != hwmon_power_cap)
		return -EOPNOTSUPP;
	if (val < 0)
		return -EINVAL;
	mw = DIV_ROUND_UP((u64)val, 1000);
	if (mw > TX8_POWER_CAP_MAX_MW)
		return -EINVAL;
	return tx8_mbox(hw->tdev, TX8_MBOX_SET_POWER_CAP, &mw, 1, NULL, NULL);
}

static const struct hwmon_channel_info *const tx8_hwmon_info[] = {
	HWMON_CHANNEL_INFO(power, HWMON_P_INPUT | HWMON_P_AVERAGE |
			   HWMON_P_AVERAGE_INTERVAL | HWMON_P_CAP),
	HWMON_CHANNEL_INFO(energy, HWMON_E_INPUT),
	NULL
};

static const struct hwmon_ops tx8_hwmon_ops = {
	.is_visible = tx8_hwmon_is_visible,
	.read = tx8_hwmon_read,
	.write = tx8_hwmon_write,
};

static const struct hwmon_chip_info tx8_hwmon_chip = {
	.ops = &tx8_hwmon_ops,
	.info = tx8_hwmon_info,
};

/*
 * A client's energy (uJ), for fdinfo and /proc/tx_meminfo: with a device of
 * interface >= 1.9, the sum of its finished jobs' energies from their
 * completion records; with a 1.8 device, the driver's queue energy split by
 * device busy time (the client's, @client_busy_ns, over the queue's), an
 * estimate (docs/kernel.md, "fdinfo").
 */
u64 tx8_file_energy_uj(struct tx8_file *tfile, u64 client_busy_ns)
{
	struct tx8_device *tdev = tfile->tdev;
	u64 queue_uj, queue_busy;

	if (tdev->cqx)
		return div_u64(atomic64_read(&tfile->energy_pj), 1000000);
	if (TX8_IF_MINOR(tdev->if_version) < 8 || !tdev->q)
		return 0;
	queue_uj = READ_ONCE(tdev->q->energy_uj);
	queue_busy = READ_ONCE(tdev->q->busy_ns);
	if (!queue_busy)
		return 0;
	if (client_busy_ns >= queue_busy)
		return queue_uj;
	return mul_u64_u64_div_u64(queue_uj, client_busy_ns, queue_busy);
}

/* Register the hwmon device (devm: it goes with the PCI device). */
int tx8_hwmon_init(struct tx8_device *tdev)
{
	struct device *dev = &tdev->pdev->dev;
	struct tx8_hwmon *hw;
	struct device *hwdev;

	if (TX8_IF_MINOR(tdev->if_version) < 8)
		return 0;	/* no power model */
	hw = devm_kzalloc(dev, sizeof(*hw), GFP_KERNEL);
	if (!hw)
		return -ENOMEM;
	hw->tdev = tdev;
	mutex_init(&hw->lock);
	hw->boot_id = READ_ONCE(tdev->ctrl->boot_id);
	hwdev = devm_hwmon_device_register_with_info(dev, "tx8", hw,
						     &tx8_hwmon_chip, NULL);
	return PTR_ERR_OR_ZERO(hwdev);
}
