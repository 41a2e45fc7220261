#!/usr/bin/python3
"""Draw the bias -m*d*f_rho(d) of ALiBi and its receptive-field variants against distance
(docs/img/rf_bias.png): why exp/gaussian decays leave far tokens unpenalised.
Usage: /usr/bin/python3 scripts/plot_rf_bias.py [--rho 16] [--slope 0.25] [-o FILE]"""
import argparse, math
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

ap = argparse.ArgumentParser()
ap.add_argument("--rho", type=float, default=16.0)
ap.add_argument("--slope", type=float, default=0.25)
ap.add_argument("-o", default="docs/img/rf_bias.png")
a = ap.parse_args()
d = list(range(0, 257))
m, rho = a.slope, a.rho
curves = {
    "alibi: -m d": [-m * x for x in d],
    "exp: -m d e^(-d/rho)": [-m * x * math.exp(-x / rho) for x in d],
    "gaussian: -m d e^(-d^2/2rho^2)": [-m * x * math.exp(-x * x / (2 * rho * rho)) for x in d],
    "reciprocal: -m d rho/(rho+d)": [-m * x * rho / (rho + x) for x in d],
}
fig, ax = plt.subplots(figsize=(7, 4))
for k, v in curves.items():
    ax.plot(d, v, label=k)
ax.axvline(rho, ls=":", c="gray")
ax.set_ylim(-m * rho * 2.5, 0.5)
ax.set_xlabel("distance d = i - j")
ax.set_ylabel("attention bias")
ax.set_title(f"ALiBi receptive-field biases (m = {m}, rho = {rho:g})")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(a.o, dpi=110)
print("wrote", a.o)
