"""CartPole trained with the cross-entropy method, in numpy alone.

The environment is the classic cart-pole balance task (Barto, Sutton and
Anderson, 1983) with the usual constants, written out here so that the
sandbox needs nothing beyond numpy. The policy is linear: push right when
w . state + b > 0. Every iteration samples a population of policies around
the current mean, keeps the best fifth, and refits mean and spread to
them. A checkpoint (the mean policy, as .npz) is written every
--checkpoint-every iterations, and summary.json at the end.
"""

import argparse
import json
import os
import time

import numpy as np

GRAVITY, CART_MASS, POLE_MASS, HALF_POLE = 9.8, 1.0, 0.1, 0.5
FORCE, TAU = 10.0, 0.02
X_LIMIT, THETA_LIMIT = 2.4, 12 * 2 * np.pi / 360


def step(state, push_right):
    x, x_dot, theta, theta_dot = state
    force = FORCE if push_right else -FORCE
    cos, sin = np.cos(theta), np.sin(theta)
    total = CART_MASS + POLE_MASS
    temp = (force + POLE_MASS * HALF_POLE * theta_dot**2 * sin) / total
    theta_acc = (GRAVITY * sin - cos * temp) / (
        HALF_POLE * (4.0 / 3.0 - POLE_MASS * cos**2 / total))
    x_acc = temp - POLE_MASS * HALF_POLE * theta_acc * cos / total
    x, x_dot = x + TAU * x_dot, x_dot + TAU * x_acc
    theta, theta_dot = theta + TAU * theta_dot, theta_dot + TAU * theta_acc
    state = np.array([x, x_dot, theta, theta_dot])
    done = abs(x) > X_LIMIT or abs(theta) > THETA_LIMIT
    return state, done


def episode(params, rng, max_steps):
    """Total reward (steps balanced) of the linear policy params."""
    w, b = params[:4], params[4]
    state = rng.uniform(-0.05, 0.05, size=4)
    for t in range(max_steps):
        state, done = step(state, w @ state + b > 0)
        if done:
            return t + 1
    return max_steps


def evaluate(params, rng, episodes, max_steps):
    return float(np.mean([episode(params, rng, max_steps) for _ in range(episodes)]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--population", type=int, default=40)
    p.add_argument("--elite", type=float, default=0.2)
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--checkpoint-every", type=int, default=5)
    p.add_argument("--out", default="runs")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    rng = np.random.default_rng(args.seed)
    ckpt_dir = os.path.join(args.out, "checkpoints")
    os.makedirs(ckpt_dir, exist_ok=True)
    mean, std = np.zeros(5), np.ones(5)
    n_elite = max(2, int(args.population * args.elite))
    start = time.time()
    baseline = evaluate(mean, rng, 10, args.max_steps)
    history, checkpoints = [], []
    print(f"iteration 0: mean policy reward {baseline:.1f}", flush=True)
    for it in range(1, args.iterations + 1):
        population = mean + std * rng.standard_normal((args.population, 5))
        rewards = np.array([episode(q, rng, args.max_steps) for q in population])
        elite = population[np.argsort(rewards)[-n_elite:]]
        mean, std = elite.mean(axis=0), elite.std(axis=0) + 0.05
        score = evaluate(mean, rng, 5, args.max_steps)
        history.append({"iteration": it, "population_mean": float(rewards.mean()),
                        "population_best": float(rewards.max()), "policy_reward": score})
        print(f"iteration {it}: population mean {rewards.mean():.1f} best {rewards.max():.0f}, "
              f"policy reward {score:.1f}", flush=True)
        if it % args.checkpoint_every == 0 or it == args.iterations:
            path = os.path.join(ckpt_dir, f"policy-{it:04d}.npz")
            np.savez(path, mean=mean, std=std, iteration=it)
            checkpoints.append(path)
    final = evaluate(mean, rng, 20, args.max_steps)
    summary = {
        "algorithm": "cross-entropy method, linear policy",
        "environment": "CartPole (numpy)",
        "iterations": args.iterations,
        "population": args.population,
        "max_steps": args.max_steps,
        "seed": args.seed,
        "baseline_reward": baseline,
        "final_reward": final,
        "solved": final >= 0.95 * args.max_steps,
        "checkpoints": checkpoints,
        "history": history,
        "seconds": round(time.time() - start, 2),
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(f"final policy reward {final:.1f} (baseline {baseline:.1f}); summary in {args.out}/summary.json", flush=True)


if __name__ == "__main__":
    main()
