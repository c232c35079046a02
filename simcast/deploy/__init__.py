"""The deployment, declared once (:class:`~simcast.deploy.deployment.Deployment`): model, device, layout,
layer partition, engine, KV cache type and MoE routing skew, built by the API, a service YAML and
calibrate-serving, and held by the serving config and the step coster. Above ``engines``, below ``inputs``.
"""
