"""The learner: the loop every algorithm shares (acting, collection, the fused epoch, evaluation).

An algorithm (rl.algorithms) reaches it through rl.learner.algorithm.Algorithm.
"""
