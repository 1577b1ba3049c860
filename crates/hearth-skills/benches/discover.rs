//! 100 SKILL.md skills discovered, parsed and checked (issue 9: under 20 ms).

#![expect(
    clippy::expect_used,
    reason = "a bench whose set-up fails has nothing to measure"
)]

use criterion::{Criterion, criterion_group, criterion_main};
use hearth_skills::{Catalog, Host, Root, SkillsOptions, Source};

fn bench(c: &mut Criterion) {
    let t = tempfile::tempdir().expect("temp dir");
    for i in 0..100 {
        let dir = t.path().join(format!("group{}/skill-{i}", i % 10));
        std::fs::create_dir_all(dir.join("references")).expect("mkdir");
        let text = format!(
            "---\nname: skill-{i}\ndescription: Does task number {i} with care.\nlicense: MIT\n\
             metadata: {{\"openclaw\": {{\"requires\": {{\"bins\": [\"sh\"], \"env\": [\"HOME\"]}}}}}}\n---\n\
             # Skill {i}\n\nStep one. Step two. See {{baseDir}}/references/api.md.\n"
        );
        std::fs::write(dir.join("SKILL.md"), text).expect("write");
        std::fs::write(dir.join("references/api.md"), "reference").expect("write");
    }
    let options = SkillsOptions {
        roots: vec![Root {
            path: t.path().into(),
            source: Source::Home,
        }],
        prompt_budget_chars: 4000,
        host: Host {
            os: "linux".into(),
            path: vec!["/usr/bin".into(), "/bin".into()],
            env: ["HOME".to_owned()].into(),
        },
        ..SkillsOptions::default()
    };
    assert_eq!(Catalog::load(&options).skills.len(), 100);
    c.bench_function("discover_100_skills", |b| {
        b.iter(|| Catalog::load(&options).skills.len())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
