"""A fake ``amdsmi`` module object with a scripted energy accumulator."""


class FakeAmdSmi:
    def __init__(self, n=1, resolution_uj=15.259, power_w=550, fail_init=None):
        self.acc = [1_000_000] * n
        self.resolution_uj = resolution_uj
        self.power_w = power_w
        self.fail_init = fail_init
        self.inits = 0

    def amdsmi_init(self):
        if self.fail_init:
            raise self.fail_init
        self.inits += 1

    def amdsmi_shut_down(self):
        self.inits -= 1

    def amdsmi_get_processor_handles(self):
        return list(range(len(self.acc)))

    def amdsmi_get_energy_count(self, h):
        return {"energy_accumulator": self.acc[h], "counter_resolution": self.resolution_uj, "timestamp": 0}

    def amdsmi_get_power_info(self, h):
        return {"current_socket_power": "N/A", "average_socket_power": self.power_w, "gfx_voltage": 800}
